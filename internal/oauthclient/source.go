package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// RefreshMargin is how long before its expiry an access token is
// refreshed, so that a request never leaves with a token about to lapse.
const RefreshMargin = time.Minute

// Source hands out the gateway's access tokens for the servers someone
// logged in to, refreshing them before they expire and saving the
// refreshed (possibly rotated) tokens back to the store. It re-reads a
// server's file when it changes, so a new login or a logout takes effect
// without a restart. It is safe for concurrent use.
type Source struct {
	// Secret, if set, is told every token value the source reads or
	// receives (access and refresh tokens), so they can be redacted.
	Secret func(values ...string)

	store  *Store
	client *http.Client
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	mu    sync.Mutex // serialises one server's refreshes
	stamp time.Time  // the file's mtime when last read or written
	cred  *Credential
}

// NewSource returns a Source over store; client reaches the token
// endpoints (nil: a client with a 30 s timeout).
func NewSource(store *Store, client *http.Client, log *slog.Logger) *Source {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{store: store, client: client, log: log, now: time.Now, entries: map[string]*entry{}}
}

// Has reports whether someone logged in to server.
func (s *Source) Has(server string) bool { return !s.store.stamp(server).IsZero() }

// Token returns server's access token, refreshed first when it expires
// within RefreshMargin. ok is false when nobody logged in to server, or
// the login was for another URL than serverURL (the token is never sent
// anywhere else).
func (s *Source) Token(ctx context.Context, server, serverURL string) (token string, ok bool, err error) {
	stamp := s.store.stamp(server)
	s.mu.Lock()
	e := s.entries[server]
	if stamp.IsZero() {
		delete(s.entries, server)
		s.mu.Unlock()
		return "", false, nil
	}
	if e == nil {
		e = &entry{}
		s.entries[server] = e
	}
	s.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cred == nil || !e.stamp.Equal(stamp) {
		c, err := s.store.Load(server)
		if errors.Is(err, ErrNoCredential) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		e.cred, e.stamp = c, stamp
		s.secret(c.Token)
	}
	c := e.cred
	if !sameURL(c.ServerURL, serverURL) {
		s.log.Warn("the stored OAuth login is for another URL; not sending its token", "server", server, "login_url", c.ServerURL)
		return "", false, nil
	}
	tok := c.Token
	if !tok.Expiry.IsZero() && s.now().Add(RefreshMargin).After(tok.Expiry) {
		if tok.RefreshToken == "" {
			if s.now().After(tok.Expiry) {
				return "", false, fmt.Errorf("server %q: its OAuth access token expired and there is no refresh token; run toolgate auth login %s", server, server)
			}
			return tok.AccessToken, true, nil
		}
		fresh, err := s.refresh(ctx, c)
		if err != nil {
			if s.now().Before(tok.Expiry) {
				// Still valid for a moment: use it, and try again next time.
				s.log.Warn("refreshing an OAuth token failed; using the current one until it expires", "server", server, "error", err)
				return tok.AccessToken, true, nil
			}
			return "", false, fmt.Errorf("server %q: refreshing its OAuth token failed (%v); run toolgate auth login %s", server, err, server)
		}
		s.secret(fresh)
		next := *c
		next.Token = fresh
		if err := s.store.Save(server, &next); err != nil {
			// The refresh token may have rotated: without saving it, the
			// next start cannot refresh. Use the token, and say so.
			s.log.Error("saving a refreshed OAuth token failed", "server", server, "error", err)
		}
		e.cred, e.stamp = &next, s.store.stamp(server)
		s.log.Info("refreshed an OAuth access token", "server", server, "expires_in", fresh.Expiry.Sub(s.now()).Round(time.Second))
		tok = fresh
	}
	return tok.AccessToken, true, nil
}

func (s *Source) secret(t *oauth2.Token) {
	if s.Secret == nil || t == nil {
		return
	}
	var v []string
	for _, x := range []string{t.AccessToken, t.RefreshToken} {
		if x != "" {
			v = append(v, x)
		}
	}
	s.Secret(v...)
}

// refresh runs one refresh_token grant. The error never holds a token:
// oauth2's RetrieveError is reduced to its status and error code.
func (s *Source) refresh(ctx context.Context, c *Credential) (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.client)
	t, err := c.oauth2Config().TokenSource(ctx, &oauth2.Token{RefreshToken: c.Token.RefreshToken}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("token endpoint answered %d %s", re.Response.StatusCode, re.ErrorCode)
		}
		return nil, fmt.Errorf("token endpoint: %v", err)
	}
	return t, nil
}

// sameURL compares two URLs after normalising scheme and host case and a
// trailing slash.
func sameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	norm := func(u *url.URL) string {
		return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.EscapedPath(), "/") + "?" + u.RawQuery
	}
	return ua.User == nil && ub.User == nil && norm(ua) == norm(ub)
}
