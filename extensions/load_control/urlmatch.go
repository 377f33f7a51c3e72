package loadcontrol

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/toolgate/toolgate/internal/glob"
	"github.com/toolgate/toolgate/internal/netguard"
)

// Target is a server URL reduced to what a connection actually goes to:
// the scheme, the host the dialer resolves, the port it dials and the path
// the server routes. Userinfo, query and fragment are dropped; they never
// take part in matching.
type Target struct {
	Scheme string // lower case: "http" or "https"
	// Host is a DNS name in lower-case ASCII (IDNA, as net/http dials it)
	// without trailing dots, or a canonical IP address (IPv4-mapped IPv6
	// unmapped, no brackets).
	Host string
	IP   bool
	// Port is the decimal port, the scheme's default when the URL has none.
	Port string
	// Path is the percent-decoded path with "." and ".." segments resolved
	// and '\' read as '/'; "/" when empty. A trailing '/' is kept.
	Path string
}

// ParseTarget parses a URL with the same parser the HTTP client uses and
// normalises it into a Target.
func ParseTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, errors.New("the URL cannot be parsed")
	}
	if u.Opaque != "" || u.Host == "" {
		return Target{}, errors.New("the URL has no host")
	}
	t := Target{Scheme: strings.ToLower(u.Scheme)}
	// A zone, or a number only some resolvers read as an address, would
	// let a pattern and the dialer disagree on the host.
	if err := netguard.CheckHost(u.Hostname()); err != nil {
		return Target{}, err
	}
	if t.Host, t.IP, err = normHost(u.Hostname()); err != nil {
		return Target{}, err
	}
	t.Port = u.Port()
	if t.Port == "" {
		switch t.Scheme {
		case "http":
			t.Port = "80"
		case "https":
			t.Port = "443"
		}
	} else {
		n, err := strconv.Atoi(t.Port)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, errors.New("the URL's port is not a number between 1 and 65535")
		}
		t.Port = strconv.Itoa(n)
	}
	t.Path = normPath(u.Path)
	return t, nil
}

// normHost canonicalises a host as the dialer will see it.
func normHost(h string) (string, bool, error) {
	if h == "" {
		return "", false, errors.New("the URL has no host")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String(), true, nil
	}
	h = strings.TrimRight(h, ".")
	if h == "" {
		return "", false, errors.New("the URL has no host")
	}
	// net/http dials idna.Lookup.ToASCII(host), which maps full-width and
	// other compatibility forms: "ｇｉｔｈｕｂ.com" connects to github.com,
	// so it must match like github.com.
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", false, errors.New("the URL's host is not a valid domain name")
	}
	a = strings.TrimRight(strings.ToLower(a), ".")
	if a == "" {
		return "", false, errors.New("the URL has no host")
	}
	// A dotted name that parses as an address after mapping is an address.
	if ip, err := netip.ParseAddr(a); err == nil {
		return ip.Unmap().String(), true, nil
	}
	return a, false, nil
}

func normPath(p string) string {
	if p == "" {
		return "/"
	}
	p = strings.ReplaceAll(p, `\`, "/")
	trailing := strings.HasSuffix(p, "/")
	p = path.Clean("/" + p)
	if trailing && p != "/" {
		p += "/"
	}
	return p
}

// URLPattern is one entry of deny_url_patterns or allow_url_patterns:
//
//	SCHEME://HOST[:PORT][PATH]
//
// SCHEME is a scheme or '*'. HOST is a DNS name, an IPv4 address, an IPv6
// address in brackets, or '*' for any host; in a name, a first label of
// exactly '*' stands for one or more labels ("*.example.com" matches
// a.example.com and a.b.example.com but not example.com), and '*' or '?'
// inside any other label match within that label only (never a '.').
// PORT is a number or '*'; without one, any port matches. PATH, if given,
// is a glob ('*' any run including '/', '?' one character) on the whole
// normalised path; without one, any path matches. Patterns never see
// userinfo, query or fragment.
type URLPattern struct {
	raw    string
	scheme string   // "" = any
	labels []string // nil = any host; a leading "*" label = one or more labels
	ip     string   // set for an IP literal host
	port   string   // "" = any
	path   string   // "" = any
}

func (p URLPattern) String() string { return p.raw }

// ParseURLPattern parses a pattern; errors say what is wrong with it.
func ParseURLPattern(raw string) (URLPattern, error) {
	p := URLPattern{raw: raw}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return p, errors.New("want SCHEME://HOST[:PORT][/PATH], e.g. https://github.com/* or http://*")
	}
	switch scheme = strings.ToLower(scheme); {
	case scheme == "*":
	case scheme == "":
		return p, errors.New("no scheme (use * for any)")
	default:
		for _, r := range scheme {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
				return p, fmt.Errorf("scheme %q is not a scheme or *", scheme)
			}
		}
		p.scheme = scheme
	}
	authority, pth := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, pth = rest[:i], rest[i:]
	}
	if strings.ContainsAny(authority, "@") {
		return p, errors.New("a pattern cannot contain userinfo ('@'); patterns match the host")
	}
	if strings.ContainsAny(authority, "#") || strings.ContainsAny(pth, "#") {
		return p, errors.New("a pattern cannot contain a fragment ('#')")
	}
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return p, errors.New("unclosed '[' in IPv6 host")
		}
		host, port = authority[1:end], authority[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return p, fmt.Errorf("unexpected %q after the IPv6 host", port)
		}
		port = strings.TrimPrefix(port, ":")
		a, err := netip.ParseAddr(host)
		if err != nil {
			return p, fmt.Errorf("[%s] is not an IPv6 address", host)
		}
		p.ip = a.Unmap().String()
	} else {
		if strings.Count(authority, ":") > 1 {
			return p, fmt.Errorf("IPv6 host %q must be in brackets, e.g. http://[::1]:8080/*", authority)
		}
		if i := strings.LastIndexByte(authority, ':'); i >= 0 {
			host, port = authority[:i], authority[i+1:]
			if port == "" {
				return p, errors.New("empty port after ':'")
			}
		}
		if err := p.parseHost(host); err != nil {
			return p, err
		}
	}
	if port != "" && port != "*" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("port %q is not a number between 1 and 65535 or *", port)
		}
		p.port = strconv.Itoa(n)
	}
	if pth != "" {
		dec, err := url.PathUnescape(pth)
		if err != nil {
			return p, fmt.Errorf("path %q: %v", pth, err)
		}
		p.path = dec
	}
	return p, nil
}

func (p *URLPattern) parseHost(host string) error {
	if host == "" {
		return errors.New("no host (use * for any host)")
	}
	if host == "*" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is6() && !a.Is4In6() {
			return fmt.Errorf("IPv6 host %q must be in brackets, e.g. http://[%s]:8080/*", host, host)
		}
		p.ip = a.Unmap().String()
		return nil
	}
	host = strings.TrimRight(strings.ToLower(host), ".")
	labels := strings.Split(host, ".")
	for i, l := range labels {
		switch {
		case l == "":
			return fmt.Errorf("host %q has an empty label", host)
		case glob.HasWildcard(l):
			// A first label of "*" is one or more labels (see Match); any
			// other wildcard matches within its label.
		default:
			a, err := idna.Lookup.ToASCII(l)
			if err != nil {
				return fmt.Errorf("host %q is not a valid domain name pattern", host)
			}
			labels[i] = strings.ToLower(a)
		}
	}
	if len(labels) == 1 && labels[0] == "*" {
		return nil
	}
	p.labels = labels
	return nil
}

// Match reports whether the pattern matches t.
func (p URLPattern) Match(t Target) bool {
	if p.scheme != "" && p.scheme != t.Scheme {
		return false
	}
	if p.port != "" && p.port != t.Port {
		return false
	}
	switch {
	case p.ip != "":
		if !t.IP || p.ip != t.Host {
			return false
		}
	case p.labels != nil:
		// IPv4 addresses match label by label too ("10.0.0.*").
		if !matchLabels(p.labels, strings.Split(t.Host, ".")) {
			return false
		}
	}
	return p.path == "" || glob.Match(p.path, t.Path)
}

func matchLabels(pat, host []string) bool {
	if pat[0] == "*" {
		// One or more labels, then the rest exactly.
		rest := pat[1:]
		if len(host) <= len(rest) {
			return false
		}
		host = host[len(host)-len(rest):]
		pat = rest
	}
	if len(pat) != len(host) {
		return false
	}
	for i := range pat {
		if !glob.Match(pat[i], host[i]) {
			return false
		}
	}
	return true
}
