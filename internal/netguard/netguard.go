// Package netguard decides which network addresses the gateway may connect
// a server to. A URL's host says little about where a connection goes
// (/etc/hosts aliases, DNS names that resolve to 127.0.0.1, numeric forms
// the C resolver reads as addresses), so the decision is made twice: on the
// host as written, refusing forms that are ambiguous, and on every address
// the dialer is about to connect to, through a net.Dialer Control hook.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// private lists the ranges that are not the public internet: what
// deny_private_networks refuses. IPv6 forms that carry an IPv4 address are
// judged by that address (embedded4).
var private = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"; 0.0.0.0 reaches the local host
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata (169.254.169.254)
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("fc00::/7"),       // unique local (ULA)
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed by some stacks)
	netip.MustParsePrefix("ff00::/8"),       // multicast
	netip.MustParsePrefix("100::/64"),       // discard
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
}

// embedded4 returns the IPv4 address an IPv6 address carries in a form
// that a stack or a translator may deliver to that IPv4 address.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a),
		netip.MustParsePrefix("::/96").Contains(a) && !a.IsUnspecified() && a != netip.IPv6Loopback(),
		netip.MustParsePrefix("::ffff:0:0:0/96").Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case netip.MustParsePrefix("2002::/16").Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// IsPrivate reports whether a is an address deny_private_networks refuses:
// loopback, unspecified, link-local (169.254.169.254 included), RFC 1918,
// carrier-grade NAT, unique-local IPv6, multicast and reserved ranges, and
// any IPv6 form that carries such an IPv4 address (IPv4-mapped,
// IPv4-compatible, NAT64, 6to4). A zoned address is always private: a zone
// only makes sense on a local link.
func IsPrivate(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	if a.Zone() != "" {
		return true
	}
	if v4, ok := embedded4(a); ok {
		return IsPrivate(v4)
	}
	for _, p := range private {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// IsLocalHost reports whether a connection to a ends on this host:
// loopback, or the unspecified address, which Linux and the BSDs deliver to
// the local host.
func IsLocalHost(a netip.Addr) bool {
	if v4, ok := embedded4(a); ok {
		a = v4
	}
	return a.IsLoopback() || a.IsUnspecified() || netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

// CheckHost refuses a URL host (as url.URL.Hostname returns it) whose
// meaning depends on who reads it: an IPv6 zone ("::1%lo"), and numbers
// that the C library's resolver reads as IPv4 addresses but Go's parser
// does not ("2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1"), so a
// pattern and the dialer could disagree on where the URL goes.
func CheckHost(host string) error {
	if strings.Contains(host, "%") {
		return errors.New("the URL's host has an IPv6 zone ('%'); zones are refused")
	}
	h := strings.TrimRight(host, ".")
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Is4() && a.String() != h {
			return errors.New("the URL's host is not an IPv4 address in canonical dotted-decimal form")
		}
		return nil
	}
	if looksNumeric(h) {
		return errors.New("the URL's host is a number that some resolvers read as an IPv4 address (e.g. 127.1, 0x7f.0.0.1, 2130706433); write the address in dotted-decimal form")
	}
	return nil
}

// looksNumeric reports whether h ends in a number: inet_aton accepts one
// to four dot-separated parts, each decimal, octal (leading 0) or
// hexadecimal (0x), and the WHATWG URL standard reads any host whose last
// label is a number as an IPv4 address. No top-level domain is a number, so
// such a host is never a DNS name.
func looksNumeric(h string) bool {
	parts := strings.Split(h, ".")
	return numericPart(parts[len(parts)-1])
}

func numericPart(p string) bool {
	if p == "" {
		return false
	}
	lp := strings.ToLower(p)
	if strings.HasPrefix(lp, "0x") {
		for _, r := range lp[2:] {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
				return false
			}
		}
		return true
	}
	for _, r := range p {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Check decides on one address about to be dialled; a non-nil error
// refuses the connection.
type Check func(addr netip.AddrPort) error

// ErrPrivate is the error of DenyPrivate.
var ErrPrivate = errors.New("the address is on a private or local network (deny_private_networks)")

// DenyPrivate refuses every address IsPrivate reports.
func DenyPrivate(addr netip.AddrPort) error {
	if IsPrivate(addr.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivate, addr.Addr())
	}
	return nil
}

// RefusedError is a connection that a Check refused before it was made.
type RefusedError struct {
	Addr netip.AddrPort
	Err  error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("connection to %s refused by the gateway: %v", e.Addr, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Control returns a net.Dialer Control hook that runs check on the address
// the socket is about to connect to, after name resolution: the address
// actually dialled, whatever name or alias the URL used.
func Control(check Check) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			// Not an IP:port (a Unix socket): nothing an HTTP URL reaches.
			return &RefusedError{Err: fmt.Errorf("%s address %q is not an IP address and port", network, address)}
		}
		if err := check(ap); err != nil {
			return &RefusedError{Addr: ap, Err: err}
		}
		return nil
	}
}

// Chain runs checks in order; the first error wins. Nil checks are skipped.
func Chain(checks ...Check) Check {
	var cs []Check
	for _, c := range checks {
		if c != nil {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return func(addr netip.AddrPort) error {
		for _, c := range cs {
			if err := c(addr); err != nil {
				return err
			}
		}
		return nil
	}
}

// Dialer returns a dialer that runs check on every address it connects to.
func Dialer(base *net.Dialer, check Check) *net.Dialer {
	d := *base
	prev := d.Control
	guard := Control(check)
	d.Control = func(network, address string, c syscall.RawConn) error {
		if err := guard(network, address, c); err != nil {
			return err
		}
		if prev != nil {
			return prev(network, address, c)
		}
		return nil
	}
	return &d
}
