package upstream

import (
	"errors"
	"fmt"
	"time"
)

const (
	// maxScoped bounds the per-principal connections of one server.
	maxScoped = 1024
	// scopedIdle stops a per-principal connection nobody used for this
	// long, when the server's config sets no idle_timeout.
	scopedIdle = 10 * time.Minute
)

// Scoped returns the server as one principal reaches it: a connection of
// its own, whose requests carry token instead of the shared token, so
// that neither the credential nor the upstream session is ever shared
// with another principal. key names the principal; the same key gets the
// same connection, started on first use and stopped when idle. token is
// asked on every request, like Options.Token. Only remote servers have
// per-principal connections.
func (s *Server) Scoped(key string, token func() (string, bool, error)) (*Server, error) {
	if !s.cfg.IsRemote() {
		return nil, fmt.Errorf("server %q: per-principal credentials need a remote server", s.cfg.Name)
	}
	if s.parent != nil {
		return nil, errors.New("upstream: Scoped on a per-principal connection")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("server %q: %w", s.cfg.Name, ErrClosed)
	}
	if c, ok := s.scoped[key]; ok {
		return c, nil
	}
	if len(s.scoped) >= maxScoped {
		for k, c := range s.scoped {
			if c.retire() {
				delete(s.scoped, k)
			}
		}
		if len(s.scoped) >= maxScoped {
			return nil, fmt.Errorf("server %q: %d principals are connected at once; try again later", s.cfg.Name, maxScoped)
		}
	}
	c := &Server{cfg: s.cfg, m: s.m, log: s.log.With("principal", key), idle: s.idle, callTimeout: s.callTimeout,
		maxResponse: s.maxResponse, dialCheck: s.dialCheck, token: token, parent: s}
	if c.idle <= 0 {
		c.idle = scopedIdle
	}
	if s.scoped == nil {
		s.scoped = map[string]*Server{}
	}
	s.scoped[key] = c
	return c, nil
}

// retire closes a per-principal connection for good if it is down (no
// connection, none starting) and reports whether it did. A caller still
// holding it gets ErrClosed rather than a connection its parent no longer
// knows of, and would never stop.
func (s *Server) retire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil || s.starting != nil {
		return false
	}
	s.closed = true
	return true
}

// PerPrincipal reports whether s is one principal's connection (see
// Scoped) rather than the server's shared one.
func (s *Server) PerPrincipal() bool { return s.parent != nil }
