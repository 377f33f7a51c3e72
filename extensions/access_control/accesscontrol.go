// Package accesscontrol is the access_control extension: it hides denied
// tools from search_tools and refuses them at call_tool, so a denied tool is
// neither found nor callable, even by a client that knows its name.
//
// Config (filters.access_control):
//
//	{"deny": ["github__delete_repo"], "deny_patterns": ["*__delete_*"], "allow_servers": ["github"],
//	 "allow": ["fs__read_file", {"group": "dev", "tools": ["github__*"]}]}
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
	"github.com/toolgate/toolgate/internal/glob"
)

// Key is the filters config key; ID the extension identifier.
const (
	Key = "access_control"
	ID  = "dev.toolgate/" + Key
)

func init() { extension.Register(Key, FromConfig) }

// Config is the access_control object.
type Config struct {
	// Deny lists exact qualified tool names (server__tool) to hide and refuse.
	Deny []string `json:"deny"`
	// DenyPatterns are globs on qualified names ('*' any run, '?' one
	// character), e.g. "*__delete_*".
	DenyPatterns []string `json:"deny_patterns"`
	// AllowServers, if non-empty, admits only these servers' tools.
	AllowServers []string `json:"allow_servers"`
	// Allow, if non-empty, admits only what it lists: an entry is an
	// exact qualified name (the shape of a policy locked down with
	// `toolgate policy generate`), admitted for every caller, or a grant
	// {"group": G, "tools": [GLOB...]} / {"principal": P, "tools": [...]}
	// admitting those tools to the callers in group G, or to principal P,
	// as the HTTP frontend's auth established them.
	Allow []AllowEntry `json:"allow"`
}

// AllowEntry is one entry of allow: a qualified tool name (Tool), or a
// grant to a principal or group.
type AllowEntry struct {
	Tool      string   `json:"-"`
	Principal string   `json:"principal"`
	Group     string   `json:"group"`
	Tools     []string `json:"tools"`
}

// UnmarshalJSON reads a string (a tool) or a grant object, strictly.
func (e *AllowEntry) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*e = AllowEntry{Tool: name}
		return nil
	}
	type grant AllowEntry
	var g grant
	if err := extension.DecodeConfig(b, &g); err != nil {
		return fmt.Errorf(`want a qualified tool name or {"group"|"principal": ..., "tools": [...]}: %v`, err)
	}
	*e = AllowEntry(g)
	e.Tool = ""
	return nil
}

// grant admits tools to one principal or one group.
type grant struct {
	principal, group string
	tools            glob.Set
}

func (g grant) covers(p *extension.Principal) bool {
	if p == nil {
		return false
	}
	if g.group != "" {
		return p.InGroup(g.group)
	}
	return p.ID() == g.principal || p.Subject == g.principal
}

// AccessControl is the extension. It holds no mutable state after New, so
// its filters are safe for concurrent use.
type AccessControl struct {
	deny     map[string]bool // lower-cased qualified names
	patterns glob.Set
	allow    map[string]bool // nil when every server is allowed
	tools    map[string]bool // lower-cased; nil when every tool is allowed
	grants   []grant         // allow entries naming a principal or group
	log      *slog.Logger
}

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

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
		for i, e := range c.Allow {
			if e.Tool == "" && e.Principal == "" && e.Group == "" {
				return nil, fmt.Errorf("allow[%d]: empty entry (want a qualified tool name or a grant)", i)
			}
			if e.Tool != "" {
				if !strings.Contains(e.Tool, "__") {
					return nil, fmt.Errorf("allow[%d]: %q is not a qualified tool name (server__tool)", i, e.Tool)
				}
				a.tools[strings.ToLower(e.Tool)] = true
				continue
			}
			if (e.Principal == "") == (e.Group == "") {
				return nil, fmt.Errorf(`allow[%d]: a grant names one "principal" or one "group"`, i)
			}
			if len(e.Tools) == 0 {
				return nil, fmt.Errorf(`allow[%d]: grant without "tools"`, i)
			}
			for j, t := range e.Tools {
				if strings.TrimSpace(t) == "" {
					return nil, fmt.Errorf("allow[%d].tools[%d]: empty pattern", i, j)
				}
			}
			a.grants = append(a.grants, grant{principal: e.Principal, group: e.Group, tools: glob.NewFoldedSet(e.Tools)})
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
	return a.CheckFor(nil, server, qualified)
}

// CheckFor is Check for a caller: allow's grants admit tools to the
// principals and groups they name. A nil principal (stdio, no auth) is
// admitted by allow's plain tool names only.
func (a *AccessControl) CheckFor(p *extension.Principal, server, qualified string) error {
	return a.check(func(g grant) bool { return g.covers(p) }, server, qualified)
}

// check decides with covers telling which grants apply.
func (a *AccessControl) check(covers func(grant) bool, server, qualified string) error {
	const reason = "this tool is not available through this gateway"
	if a.allow != nil && !a.allow[server] {
		return &extension.Denial{Rule: Key + ".allow_servers", Reason: reason, Detail: fmt.Sprintf("server %q is not in allow_servers", server), Code: extension.CodePermissionDenied}
	}
	if a.tools != nil && !a.tools[strings.ToLower(qualified)] && !a.granted(covers, qualified) {
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

func (a *AccessControl) granted(covers func(grant) bool, qualified string) bool {
	for _, g := range a.grants {
		if _, ok := g.tools.Match(qualified); ok && covers(g) {
			return true
		}
	}
	return false
}

// AdmitServer refuses a server outside allow_servers, so that in
// passthrough mode its resources and prompts are hidden like its tools.
func (a *AccessControl) AdmitServer(_ context.Context, server string) error {
	if a.allow != nil && !a.allow[server] {
		return &extension.Denial{Rule: Key + ".allow_servers", Reason: "this server is not available through this gateway", Code: extension.CodePermissionDenied}
	}
	return nil
}

// FilterVisible drops every tool Check refuses. It runs before top_k
// truncation, so a hidden tool never takes a result slot.
func (a *AccessControl) FilterVisible(ctx context.Context, _ *extension.VisibilityRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
	out := results[:0:0]
	p := extension.PrincipalFrom(ctx)
	for _, r := range results {
		if err := a.CheckFor(p, r.Server, r.Name); err != nil {
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

// FilterList drops nothing (the search and call filters hide and refuse),
// but tells whoever loaded a server which of its tools Check refuses, so
// load_mcp_server does not count them as usable.
func (a *AccessControl) FilterList(_ context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	for _, t := range tools {
		if t == nil {
			continue
		}
		// A listing has no caller: a tool is withheld when no caller
		// could be granted it.
		var d *extension.Denial
		anyone := func(grant) bool { return true }
		if err := a.check(anyone, req.ServerName, req.ServerName+"__"+t.Name); errors.As(err, &d) {
			req.Withhold(t.Name, d.Rule, d.Reason)
		}
	}
	return tools, nil
}

// callCheck refuses a call Check refuses, whatever the client knows.
func (a *AccessControl) callCheck(ctx context.Context, req *extension.CallRequest) error {
	server := req.ServerName
	if server == "" {
		// Server names never contain "__", so the first one splits.
		server, _, _ = strings.Cut(req.ToolName, "__")
	}
	return a.CheckFor(extension.PrincipalFrom(ctx), server, req.ToolName)
}

// WrapCall refuses a call Check refuses, whatever the client knows.
func (a *AccessControl) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(a.callCheck)(next)
}
