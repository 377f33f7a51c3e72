package upstream

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

func (s *Server) httpClient() (*http.Client, error) {
	origin, err := url.Parse(s.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %v", err)
	}
	base := s.m.opts.HTTPClient
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := *base
	t := &headerTransport{base: rt, headers: s.cfg.Headers, scheme: origin.Scheme, host: origin.Host}
	if f := s.m.opts.Token; f != nil {
		cfg := s.cfg
		t.token = func() (string, bool, error) { return f(cfg) }
	}
	c.Transport = t
	return &c, nil
}

// headerTransport adds configured headers and the bearer token, but only
// to requests for the server's own origin: a redirect or an endpoint URL
// pointing elsewhere never carries them. The token is looked up for every
// request, so a rotated token is used from the next request on.
type headerTransport struct {
	base         http.RoundTripper
	headers      map[string]string
	token        func() (string, bool, error)
	scheme, host string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.EqualFold(r.URL.Scheme, t.scheme) || !strings.EqualFold(r.URL.Host, t.host) {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.token != nil {
		tok, ok, err := t.token()
		if err != nil {
			return nil, err
		}
		if ok {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return t.base.RoundTrip(r)
}
