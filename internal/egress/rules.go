package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/netguard"
)

// Modes of a server's egress policy.
const (
	// ModeOff: the server's network is left alone (the default).
	ModeOff = "off"
	// ModeMonitor: the server is given a proxy that applies the allow list
	// and records every connection; a server that ignores the proxy
	// variables still connects directly.
	ModeMonitor = "monitor"
	// ModeEnforce: the server runs in a network namespace of its own whose
	// only way out is the proxy (Linux).
	ModeEnforce = "enforce"
)

// Rule is one entry of an allow list: a host pattern and a port.
type Rule struct {
	// Host is a lower-case DNS name, "*.suffix" (any name below suffix),
	// "*" (any name), or empty when Addr is set.
	Host string
	// Addr is set for an IP literal entry ("10.0.0.5:80", "[::1]:8080").
	Addr netip.Addr
	// Port is the port, or 0 for "*" (any port).
	Port uint16
}

func (r Rule) String() string {
	port := "*"
	if r.Port != 0 {
		port = strconv.Itoa(int(r.Port))
	}
	if r.Addr.IsValid() {
		return net.JoinHostPort(r.Addr.String(), port)
	}
	return r.Host + ":" + port
}

// Rules is an allow list. The zero value allows nothing.
type Rules []Rule

// ParseRules parses allow-list entries ("api.github.com:443",
// "*.githubusercontent.com:443", "127.0.0.1:8080", "[::1]:8080", "host:*").
// The error names the entry.
func ParseRules(entries []string) (Rules, error) {
	out := make(Rules, 0, len(entries))
	for i, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, fmt.Errorf("allow[%d] %q: %v", i, e, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRule parses one allow-list entry.
func ParseRule(s string) (Rule, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Rule{}, errors.New(`want "host:port" (a port or "*"; IPv6 addresses in brackets)`)
	}
	var r Rule
	if port != "*" {
		p, err := parsePort(port)
		if err != nil {
			return Rule{}, err
		}
		r.Port = p
	}
	// "10.0.0.1." is the address too: a trailing dot must not turn an
	// address into a name that name patterns match.
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		if err := netguard.CheckHost(host); err != nil {
			return Rule{}, err
		}
		r.Addr = a
		return r, nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case h == "*":
	case strings.HasPrefix(h, "*."):
		if err := checkName(h[2:]); err != nil {
			return Rule{}, err
		}
	default:
		if err := checkName(h); err != nil {
			return Rule{}, err
		}
	}
	r.Host = h
	return r, nil
}

func parsePort(s string) (uint16, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535 or \"*\"", s)
	}
	return uint16(p), nil
}

// checkName accepts a DNS name of letters, digits, '-', '_' and dots that
// no resolver could read as an IPv4 address.
func checkName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("empty or over-long host name")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host %q has an empty or over-long label", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("host %q: character %q is not allowed in a host name (wildcards only as a leading \"*.\")", h, c)
			}
		}
	}
	return netguard.CheckHost(h)
}

// Target is a host and port a client asked the proxy for, normalised.
type Target struct {
	// Host is the lower-case name without a trailing dot, or the address
	// in canonical form for an IP literal.
	Host string
	Addr netip.Addr // set for an IP literal
	Port uint16
}

func (t Target) String() string { return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port))) }

// ParseTarget reads the "host:port" of a CONNECT request or a URL, refusing
// hosts whose meaning depends on who reads them (zones, numeric forms
// such as 2130706433 or 0x7f.1).
func ParseTarget(hostport string) (Target, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return Target{}, fmt.Errorf("%q is not host:port", hostport)
	}
	p, err := parsePort(port)
	if err != nil {
		return Target{}, err
	}
	if err := netguard.CheckHost(host); err != nil {
		return Target{}, err
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		return Target{Host: a.String(), Addr: a, Port: p}, nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if err := checkName(h); err != nil {
		return Target{}, err
	}
	return Target{Host: h, Port: p}, nil
}

func (r Rule) portOK(p uint16) bool { return r.Port == 0 || r.Port == p }

// matchName reports whether the rule admits the target as asked for.
func (r Rule) matchName(t Target) bool {
	if !r.portOK(t.Port) {
		return false
	}
	if t.Addr.IsValid() || r.Addr.IsValid() {
		return t.Addr.IsValid() && r.Addr == t.Addr
	}
	switch {
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(t.Host, r.Host[1:])
	}
	return r.Host == t.Host
}

// Admit reports whether the target, as asked for, is on the list.
func (rs Rules) Admit(t Target) bool {
	for _, r := range rs {
		if r.matchName(t) {
			return true
		}
	}
	return false
}

// CheckAddr decides on an address about to be dialled for an admitted
// target. A public address is fine: the name was admitted. An address
// netguard calls private (loopback, link-local and cloud metadata, RFC
// 1918, unique-local, IPv6 forms carrying one of those) passes only when
// the list names that address itself with the port: a name never reaches
// the local network, whatever its DNS says.
func (rs Rules) CheckAddr(ap netip.AddrPort) error {
	if !netguard.IsPrivate(ap.Addr()) {
		return nil
	}
	for _, r := range rs {
		if r.Addr.IsValid() && r.portOK(ap.Port()) && (r.Addr == ap.Addr() || r.Addr == ap.Addr().Unmap()) {
			return nil
		}
	}
	return fmt.Errorf("%s is a private, loopback or link-local address and the allow list does not name it", ap.Addr())
}
