// Package loadcontrol is the load_control extension: it decides, before
// any connection is made, whether load_mcp_server may connect a server,
// by its name and by its URL. URL patterns match the parsed and normalised
// scheme, host, port and path, so neither a path nor userinfo can pass for
// a host (https://evil.com/https://github.com/x, https://github.com@evil.com/).
// See README.md for the pattern syntax.
package loadcontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/glob"
	"github.com/toolgate/toolgate/extensions/internal/strict"
)

// Key is the filters config key; ID the extension identifier.
const (
	Key = "load_control"
	ID  = "dev.toolgate/" + Key
)

func init() { extension.Register(Key, New) }

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
}

// LoadControl is the extension; immutable after New, so safe for
// concurrent use.
type LoadControl struct {
	extension.Base
	denyNames    map[string]bool
	namePatterns glob.Set
	deny, allow  []URLPattern
	log          *slog.Logger
}

// New is the factory registered for "load_control".
func New(raw json.RawMessage) (extension.Extension, error) {
	var c Config
	if err := strict.Decode(raw, &c); err != nil {
		return nil, err
	}
	return FromConfig(c)
}

// FromConfig builds the extension from a decoded Config.
func FromConfig(c Config) (*LoadControl, error) {
	l := &LoadControl{denyNames: map[string]bool{}, namePatterns: glob.NewFoldedSet(c.DenyNamePatterns), log: slog.New(slog.DiscardHandler)}
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

// LoadFilter runs Check before any connection is attempted.
func (l *LoadControl) LoadFilter() extension.LoadFilter {
	return func(ctx context.Context, req *extension.LoadRequest) error {
		err := l.Check(req.ServerName, req.URL)
		if d, ok := extension.AsDenial(err); ok {
			l.log.InfoContext(ctx, "server load refused", "rule", d.Rule, "server", req.ServerName, "detail", d.Detail)
		}
		return err
	}
}
