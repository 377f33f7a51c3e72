// Package loadcontrol is the load_control extension: it decides, before
// any connection is made, whether load_mcp_server may connect a server,
// by its name and by its URL. URL patterns match the parsed and normalised
// scheme, host, port and path, so neither a path nor userinfo can pass for
// a host (https://evil.com/https://github.com/x, https://github.com@evil.com/).
// See README.md for the pattern syntax.
package loadcontrol

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/glob"
	"github.com/toolgate/toolgate/internal/netguard"
)

// Key is the filters config key; ID the extension identifier.
const (
	Key = "load_control"
	ID  = "dev.toolgate/" + Key
)

func init() { extension.Register(Key, FromConfig) }

// Config is the load_control object.
type Config struct {
	// DenyNames are server names to refuse, compared ignoring case.
	DenyNames []string `json:"deny_names"`
	// DenyNamePatterns are globs on server names, compared ignoring case.
	DenyNamePatterns []string `json:"deny_name_patterns"`
	// DenyURLPatterns refuse a URL that matches any of them (URLPattern).
	DenyURLPatterns []string `json:"deny_url_patterns"`
	// AllowURLPatterns, if non-empty, admit only URLs matching one of them.
	AllowURLPatterns []string `json:"allow_url_patterns"`
	// DenyPrivateNetworks refuses connections to loopback, link-local,
	// private and other non-public addresses (netguard.IsPrivate), judged
	// on the address actually dialled. Nil means true: run-time loads are
	// kept off private networks unless the operator says otherwise.
	DenyPrivateNetworks *bool `json:"deny_private_networks"`
}

// LoadControl is the extension; immutable after New, so safe for
// concurrent use.
type LoadControl struct {
	denyNames    map[string]bool
	namePatterns glob.Set
	deny, allow  []URLPattern
	// allowPrivate is deny_private_networks set to false.
	allowPrivate bool
	log          *slog.Logger
}

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// FromConfig builds the extension from a decoded Config.
func FromConfig(c Config) (*LoadControl, error) {
	l := &LoadControl{denyNames: map[string]bool{}, namePatterns: glob.NewFoldedSet(c.DenyNamePatterns), log: slog.New(slog.DiscardHandler)}
	l.allowPrivate = c.DenyPrivateNetworks != nil && !*c.DenyPrivateNetworks
	for i, n := range c.DenyNames {
		if strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("deny_names[%d]: empty name", i)
		}
		l.denyNames[strings.ToLower(n)] = true
	}
	for i, p := range c.DenyNamePatterns {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("deny_name_patterns[%d]: empty pattern", i)
		}
	}
	var err error
	if l.deny, err = parsePatterns("deny_url_patterns", c.DenyURLPatterns); err != nil {
		return nil, err
	}
	if l.allow, err = parsePatterns("allow_url_patterns", c.AllowURLPatterns); err != nil {
		return nil, err
	}
	return l, nil
}

func parsePatterns(field string, raw []string) ([]URLPattern, error) {
	out := make([]URLPattern, 0, len(raw))
	for i, r := range raw {
		p, err := ParseURLPattern(r)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q: %v", field, i, r, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (*LoadControl) ID() string             { return ID }
func (*LoadControl) Phase() extension.Phase { return extension.PhaseAdmit }

func (l *LoadControl) Provision(_ context.Context, h extension.Host) error {
	if h.Logger != nil {
		l.log = h.Logger
	}
	return nil
}

// Check decides on a server load: nil to admit, else a Denial naming the
// rule. Rules run in the order deny_names, deny_name_patterns,
// deny_url_patterns, allow_url_patterns. Reasons never quote the patterns.
func (l *LoadControl) Check(name, rawURL string) error {
	deny := func(rule, reason, detail string) error {
		return &extension.Denial{Rule: Key + "." + rule, Reason: reason, Detail: detail, Code: extension.CodePermissionDenied}
	}
	const nameReason = "this server name may not be loaded through this gateway"
	if l.denyNames[strings.ToLower(name)] {
		return deny("deny_names", nameReason, fmt.Sprintf("%q is in deny_names", name))
	}
	if p, ok := l.namePatterns.Match(name); ok {
		return deny("deny_name_patterns", nameReason, fmt.Sprintf("%q matches %q", name, p))
	}
	t, err := ParseTarget(rawURL)
	if err != nil {
		return deny("url", err.Error(), err.Error())
	}
	const urlReason = "servers at this URL may not be loaded through this gateway"
	for _, p := range l.deny {
		if p.Match(t) {
			return deny("deny_url_patterns", urlReason, fmt.Sprintf("%s://%s:%s%s matches %q", t.Scheme, t.Host, t.Port, t.Path, p))
		}
	}
	if len(l.allow) > 0 {
		for _, p := range l.allow {
			if p.Match(t) {
				return nil
			}
		}
		return deny("allow_url_patterns", urlReason, fmt.Sprintf("%s://%s:%s%s matches no allowed pattern", t.Scheme, t.Host, t.Port, t.Path))
	}
	return nil
}

// CheckDial decides on one address the connection to rawURL (already
// admitted by Check) is about to dial: deny_url_patterns match it as if
// the URL had named that address, so a name or alias that resolves to a
// denied address is refused too. A pattern naming a loopback address
// (127.0.0.1, [::1]) or localhost matches every address that reaches this
// host: all of 127/8, ::1, and the unspecified 0.0.0.0 and [::].
// allow_url_patterns are not applied to addresses: they admit names, and
// the name was judged by Check.
func (l *LoadControl) CheckDial(rawURL string, addr netip.AddrPort) error {
	if len(l.deny) == 0 {
		return nil
	}
	t, err := ParseTarget(rawURL)
	if err != nil {
		return err
	}
	t.Port = strconv.Itoa(int(addr.Port()))
	a := addr.Addr().Unmap()
	hosts := []Target{{Host: a.String(), IP: true}}
	if netguard.IsLocalHost(a) {
		hosts = append(hosts, Target{Host: "127.0.0.1", IP: true}, Target{Host: "::1", IP: true}, Target{Host: "localhost"})
	}
	for _, h := range hosts {
		d := t
		d.Host, d.IP = h.Host, h.IP
		for _, p := range l.deny {
			if p.Match(d) {
				return fmt.Errorf("load_control.deny_url_patterns: the connection would go to %s, which matches a denied pattern", addr)
			}
		}
	}
	return nil
}

// FilterLoad runs Check before any connection is attempted, and adds
// CheckDial to the checks of every address the connection dials.
func (l *LoadControl) FilterLoad(ctx context.Context, req *extension.LoadRequest) error {
	err := l.Check(req.ServerName, req.URL)
	if d, ok := extension.AsDenial(err); ok {
		l.log.InfoContext(ctx, "server load refused", "rule", d.Rule, "server", req.ServerName, "detail", d.Detail)
	}
	if err != nil {
		return err
	}
	if l.allowPrivate {
		req.AllowPrivateNetworks = true
	}
	if len(l.deny) > 0 {
		u := req.URL
		req.DialChecks = append(req.DialChecks, func(addr netip.AddrPort) error { return l.CheckDial(u, addr) })
	}
	return nil
}
