// Package accesscontrol is the access_control extension: it hides denied
// tools from search_tools and refuses them at call_tool, so a denied tool is
// neither found nor callable, even by a client that knows its name.
//
// Config (filters.access_control):
//
//	{"deny": ["github__delete_repo"], "deny_patterns": ["*__delete_*"], "allow_servers": ["github"]}
//
// deny and deny_patterns compare qualified names (server__tool) ignoring
// case; allow_servers compares server names exactly. See README.md.
package accesscontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/glob"
	"github.com/toolgate/toolgate/extensions/internal/strict"
)

// Key is the filters config key; ID the extension identifier.
const (
	Key = "access_control"
	ID  = "dev.toolgate/" + Key
)

func init() { extension.Register(Key, New) }

// Config is the access_control object.
type Config struct {
	// Deny lists exact qualified tool names (server__tool) to hide and refuse.
	Deny []string `json:"deny"`
	// DenyPatterns are globs on qualified names ('*' any run, '?' one
	// character), e.g. "*__delete_*".
	DenyPatterns []string `json:"deny_patterns"`
	// AllowServers, if non-empty, admits only these servers' tools.
	AllowServers []string `json:"allow_servers"`
	// Allow, if non-empty, admits only these exact qualified names (the
	// shape of a policy locked down with `toolgate policy generate`).
	Allow []string `json:"allow"`
}

// AccessControl is the extension. It holds no mutable state after New, so
// its filters are safe for concurrent use.
type AccessControl struct {
	extension.Base
	deny     map[string]bool // lower-cased qualified names
	patterns glob.Set
	allow    map[string]bool // nil when every server is allowed
	tools    map[string]bool // lower-cased; nil when every tool is allowed
	log      *slog.Logger
}

// New is the factory registered for "access_control".
func New(raw json.RawMessage) (extension.Extension, error) {
	var c Config
	if err := strict.Decode(raw, &c); err != nil {
		return nil, err
	}
	return FromConfig(c)
}

// FromConfig builds the extension from a decoded Config.
func FromConfig(c Config) (*AccessControl, error) {
	a := &AccessControl{deny: map[string]bool{}, patterns: glob.NewFoldedSet(c.DenyPatterns), log: slog.New(slog.DiscardHandler)}
	for i, n := range c.Deny {
		if strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("deny[%d]: empty tool name", i)
		}
		a.deny[strings.ToLower(n)] = true
	}
	for i, p := range c.DenyPatterns {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("deny_patterns[%d]: empty pattern", i)
		}
	}
	if len(c.AllowServers) > 0 {
		a.allow = map[string]bool{}
		for i, s := range c.AllowServers {
			if s == "" || strings.Contains(s, "__") {
				return nil, fmt.Errorf("allow_servers[%d]: %q is not a server name", i, s)
			}
			a.allow[s] = true
		}
	}
	if len(c.Allow) > 0 {
		a.tools = map[string]bool{}
		for i, n := range c.Allow {
			if !strings.Contains(n, "__") {
				return nil, fmt.Errorf("allow[%d]: %q is not a qualified tool name (server__tool)", i, n)
			}
			a.tools[strings.ToLower(n)] = true
		}
	}
	return a, nil
}

func (*AccessControl) ID() string             { return ID }
func (*AccessControl) Phase() extension.Phase { return extension.PhaseAuthorize }

func (a *AccessControl) Provision(_ context.Context, h extension.Host) error {
	if h.Logger != nil {
		a.log = h.Logger
	}
	return nil
}

// Check decides on one tool: nil if it may be found and called, else a
// Denial naming the rule. The reason is the same for every rule and never
// repeats the configured names or patterns.
func (a *AccessControl) Check(server, qualified string) error {
	const reason = "this tool is not available through this gateway"
	if a.allow != nil && !a.allow[server] {
		return &extension.Denial{Rule: Key + ".allow_servers", Reason: reason, Detail: fmt.Sprintf("server %q is not in allow_servers", server), Code: extension.CodePermissionDenied}
	}
	if a.tools != nil && !a.tools[strings.ToLower(qualified)] {
		return &extension.Denial{Rule: Key + ".allow", Reason: reason, Detail: fmt.Sprintf("%q is not in allow", qualified), Code: extension.CodePermissionDenied}
	}
	if a.deny[strings.ToLower(qualified)] {
		return &extension.Denial{Rule: Key + ".deny", Reason: reason, Detail: fmt.Sprintf("%q is in deny", qualified), Code: extension.CodePermissionDenied}
	}
	if p, ok := a.patterns.Match(qualified); ok {
		return &extension.Denial{Rule: Key + ".deny_patterns", Reason: reason, Detail: fmt.Sprintf("%q matches deny pattern %q", qualified, p), Code: extension.CodePermissionDenied}
	}
	return nil
}

// AdmitServer refuses a server outside allow_servers, so that in
// passthrough mode its resources and prompts are hidden like its tools.
func (a *AccessControl) AdmitServer(_ context.Context, server string) error {
	if a.allow != nil && !a.allow[server] {
		return &extension.Denial{Rule: Key + ".allow_servers", Reason: "this server is not available through this gateway", Code: extension.CodePermissionDenied}
	}
	return nil
}

// SearchFilter drops every result Check refuses. It runs before top_k
// truncation, so a hidden tool never takes a result slot.
func (a *AccessControl) SearchFilter() extension.SearchFilter {
	return func(ctx context.Context, _ *extension.SearchRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
		out := results[:0:0]
		for _, r := range results {
			if err := a.Check(r.Server, r.Name); err != nil {
				var d *extension.Denial
				if errors.As(err, &d) {
					a.log.DebugContext(ctx, "search result hidden", "rule", d.Rule, "tool", r.Name)
				}
				continue
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// ListFilter drops nothing (the search and call filters hide and refuse),
// but tells whoever loaded a server which of its tools Check refuses, so
// load_mcp_server does not count them as usable.
func (a *AccessControl) ListFilter() extension.ListFilter {
	return func(_ context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
		for _, t := range tools {
			if t == nil {
				continue
			}
			var d *extension.Denial
			if err := a.Check(req.ServerName, req.ServerName+"__"+t.Name); errors.As(err, &d) {
				req.Withhold(t.Name, d.Rule, d.Reason)
			}
		}
		return tools, nil
	}
}

// CallFilter refuses a call Check refuses, whatever the client knows.
func (a *AccessControl) CallFilter() extension.CallFilter {
	return func(_ context.Context, req *extension.CallRequest) error {
		server := req.ServerName
		if server == "" {
			// Server names never contain "__", so the first one splits.
			server, _, _ = strings.Cut(req.ToolName, "__")
		}
		return a.Check(server, req.ToolName)
	}
}
