package upstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/netguard"
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
	if s.dialCheck != nil {
		ht, ok := rt.(*http.Transport)
		if !ok {
			// Fail closed: another transport may dial without the check.
			return nil, fmt.Errorf("server %q: its connections must be checked at dial time, which needs an *http.Transport (have %T)", s.cfg.Name, rt)
		}
		ht = ht.Clone()
		// Through a proxy, the dialled address is the proxy's, and the
		// check could not see where the request goes.
		ht.Proxy = nil
		ht.DialContext = netguard.Dialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, s.dialCheck).DialContext
		ht.DialTLSContext = nil
		rt = ht
	}
	c := *base
	t := &headerTransport{base: rt, headers: s.cfg.Headers, scheme: origin.Scheme, host: origin.Host, log: s.log, server: s.cfg.Name, limit: s.maxResponse, probe: &s.probe, onMessage: s.onMessage()}
	if f := s.m.opts.Token; f != nil {
		cfg := s.cfg
		t.token = func() (string, bool, error) { return f(cfg) }
	}
	if s.token != nil {
		t.token = s.token
	}
	c.Transport = t
	// A redirect to another origin would take the connection somewhere the
	// load filters never judged (and it would go without credentials).
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !t.sameOrigin(req.URL) {
			return fmt.Errorf("server %q redirected to another origin (%s); refusing to follow", s.cfg.Name, req.URL.Host)
		}
		if len(via) >= 10 {
			return fmt.Errorf("server %q: too many redirects", s.cfg.Name)
		}
		return nil
	}
	return &c, nil
}

// headerTransport adds configured headers and the bearer token to requests
// for the server's own origin and refuses every other origin: neither a
// redirect nor an SSE endpoint event can move the connection to a host the
// load filters never judged, or carry the credentials there. The token is
// looked up for every request, so a rotated token is used from the next
// request on.
type headerTransport struct {
	base         http.RoundTripper
	headers      map[string]string
	token        func() (string, bool, error)
	scheme, host string
	log          *slog.Logger
	server       string
	limit        int64 // bytes in one response body or SSE event
	probe        *probe
	// onMessage is shown each complete SSE event's data (see
	// Options.OnMessage); nil: no tap.
	onMessage func([]byte)
}

func (t *headerTransport) sameOrigin(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, t.scheme) && strings.EqualFold(u.Host, t.host)
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.sameOrigin(r.URL) {
		return nil, fmt.Errorf("refusing a request to %s://%s: the server is configured at %s://%s", r.URL.Scheme, r.URL.Host, t.scheme, t.host)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.token != nil {
		tok, ok, err := t.token()
		if err != nil {
			// The detail (the file's path and line) is for the operator's
			// log, not for the model that sees this error.
			if t.log != nil {
				t.log.Error("reading the tokens file failed", "error", err)
			}
			return nil, errors.New("toolgate could not read this server's credentials; the gateway's log says why")
		}
		if ok {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	id := requestID(r)
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		if t.probe != nil && r.Context().Err() == nil {
			t.probe.sawError(err)
		}
		return nil, err
	}
	if t.probe != nil {
		t.probe.sawResponse(resp)
	}
	return t.limitResponse(r, id, resp)
}
