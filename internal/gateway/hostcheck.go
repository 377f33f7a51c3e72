package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// hostGuard protects every path of the HTTP frontend against DNS
// rebinding: a browser page on evil.example whose name an attacker points
// at this gateway sends "Host: evil.example" (and an Origin naming it), so
// a request whose Host or Origin names a host the gateway does not answer
// to is refused, whatever address the listener is bound to. Allowed are
// the localhost names, loopback addresses, the IP address the connection
// arrived on (an IP literal cannot be rebound), a host name given to
// --listen and the configured http.allowed_hosts. Names compare case-insensitively, without a
// trailing dot.
type hostGuard struct {
	allowed map[string]bool
}

func newHostGuard(allowed []string) hostGuard {
	g := hostGuard{allowed: map[string]bool{}}
	for _, h := range allowed {
		g.allowed[normalHost(h)] = true
	}
	return g
}

// normalHost returns the host of a Host header or host[:port], lower case,
// without brackets or a trailing dot.
func normalHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return strings.ToLower(host)
}

// allows reports whether a Host header value is acceptable on a connection
// that arrived at local (nil if unknown).
func (g hostGuard) allows(hostport string, local net.Addr) bool {
	host := normalHost(hostport)
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || g.allowed[host] {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return true
	}
	if local != nil {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil && ap.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

// handler wraps h with the Host and Origin check.
func (g hostGuard) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !g.allows(r.Host, local) {
			http.Error(w, "forbidden: Host header names a host this gateway does not serve (add it to http.allowed_hosts)", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || u.Host == "" || !g.allows(u.Host, local) {
				http.Error(w, "forbidden: Origin header names a host this gateway does not serve (add it to http.allowed_hosts)", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
