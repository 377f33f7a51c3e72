package config

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Defaults of the "http" object.
const (
	DefaultMaxSessions        = 1000
	DefaultSessionIdleTimeout = 30 * time.Minute
)

// HTTP is the "http" object: the streamable HTTP frontend (serve --listen).
type HTTP struct {
	// AllowedHosts are host names or IP addresses clients may put in the
	// Host and Origin headers, beyond the localhost names, the loopback
	// addresses, the address the connection arrived on and a host name
	// given to --listen, which are always allowed. Any other name is refused (DNS rebinding).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// MaxSessions caps the stateful MCP sessions kept at once; a new one
	// beyond it closes the session idle the longest. Default 1000.
	MaxSessions *int `json:"max_sessions,omitempty"`
	// SessionIdleTimeout closes a session that has had no request for
	// this many seconds. Default 1800.
	SessionIdleTimeout *float64 `json:"session_idle_timeout,omitempty"`
}

// SessionLimit returns the cap on stateful sessions.
func (h HTTP) SessionLimit() int {
	if h.MaxSessions == nil {
		return DefaultMaxSessions
	}
	return *h.MaxSessions
}

// SessionIdle returns how long an idle session is kept.
func (h HTTP) SessionIdle() time.Duration {
	if h.SessionIdleTimeout == nil {
		return DefaultSessionIdleTimeout
	}
	return seconds(*h.SessionIdleTimeout)
}

// validate checks the object and normalises AllowedHosts to lower case
// without a trailing dot.
func (h *HTTP) validate() error {
	for i, raw := range h.AllowedHosts {
		host := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
		if host == "" || strings.ContainsAny(host, "/:@*?# ") && net.ParseIP(strings.Trim(host, "[]")) == nil {
			return fmt.Errorf("http.allowed_hosts[%d]: %q is not a host name or IP address (no scheme, port, path or wildcard)", i, raw)
		}
		h.AllowedHosts[i] = strings.Trim(host, "[]")
	}
	if h.MaxSessions != nil && *h.MaxSessions < 1 {
		return fmt.Errorf("http.max_sessions: %d; want at least 1", *h.MaxSessions)
	}
	if t := h.SessionIdleTimeout; t != nil && (*t <= 0 || *t > maxSeconds) {
		return fmt.Errorf("http.session_idle_timeout: %v seconds; want more than 0 and at most %d", *t, maxSeconds)
	}
	return nil
}
