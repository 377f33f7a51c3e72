package accesscontrol

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
)

func newAC(t *testing.T, raw string) *AccessControl {
	t.Helper()
	e, err := New(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("New(%s): %v", raw, err)
	}
	if err := exttest.Provision(e, context.Background(), extension.Host{}); err != nil {
		t.Fatal(err)
	}
	return e.(*AccessControl)
}

func TestConfigErrors(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"deny_pattern": ["x"]}`, `unknown field "deny_pattern"`},
		{`{"deny": "github__delete_repo"}`, `deny: want an array of strings`},
		{`{"deny": [""]}`, `deny[0]: empty tool name`},
		{`{"deny_patterns": ["a", " "]}`, `deny_patterns[1]: empty pattern`},
		{`{"allow_servers": ["a__b"]}`, `allow_servers[0]: "a__b" is not a server name`},
		{`[]`, `want an object`},
	}
	for _, tt := range tests {
		_, err := New(json.RawMessage(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s) = %v, want error containing %q", tt.raw, err, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name, config string
		server, tool string
		wantRule     string // "" means allowed
	}{
		{"empty config allows", `{}`, "github", "github__delete_repo", ""},
		{"null config allows", `null`, "github", "github__delete_repo", ""},
		{"exact deny", `{"deny": ["github__delete_repo"]}`, "github", "github__delete_repo", "access_control.deny"},
		{"exact deny ignores case", `{"deny": ["GitHub__Delete_Repo"]}`, "github", "github__delete_repo", "access_control.deny"},
		{"exact deny is exact", `{"deny": ["github__delete_repo"]}`, "github", "github__delete_repos", ""},
		{"pattern", `{"deny_patterns": ["*__delete_*"]}`, "fs", "fs__delete_file", "access_control.deny_patterns"},
		{"pattern ignores case", `{"deny_patterns": ["*__delete_*"]}`, "repo", "repo__Delete_Branch", "access_control.deny_patterns"},
		{"pattern anchored", `{"deny_patterns": ["*__delete_*"]}`, "fs", "fs__undelete_file", ""},
		{"pattern ? one char", `{"deny_patterns": ["everything__ech?"]}`, "everything", "everything__echo", "access_control.deny_patterns"},
		{"allow_servers admits", `{"allow_servers": ["everything"]}`, "everything", "everything__echo", ""},
		{"allow_servers refuses", `{"allow_servers": ["everything"]}`, "memory", "memory__read_graph", "access_control.allow_servers"},
		{"allow_servers is case-sensitive", `{"allow_servers": ["Everything"]}`, "everything", "everything__echo", "access_control.allow_servers"},
		{"allow_servers before deny", `{"allow_servers": ["a"], "deny": ["b__x"]}`, "b", "b__x", "access_control.allow_servers"},
		{"deny inside allowed server", `{"allow_servers": ["a"], "deny_patterns": ["a__rm*"]}`, "a", "a__rm_rf", "access_control.deny_patterns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAC(t, tt.config)
			// The call filter and the search filter must agree.
			err := exttest.Call(a, context.Background(), &extension.CallRequest{ToolName: tt.tool, ServerName: tt.server})
			res, serr := a.FilterVisible(context.Background(), &extension.VisibilityRequest{},
				[]extension.SearchResult{{Name: tt.tool, Server: tt.server}})
			if serr != nil {
				t.Fatal(serr)
			}
			if tt.wantRule == "" {
				if err != nil || len(res) != 1 {
					t.Fatalf("want allowed; call: %v, search kept %d", err, len(res))
				}
				return
			}
			d, ok := extension.AsDenial(err)
			if !ok || d.Rule != tt.wantRule {
				t.Fatalf("call: got %v, want a denial by %s", err, tt.wantRule)
			}
			if strings.Contains(d.Reason, "delete") || strings.Contains(d.Reason, "*") {
				t.Errorf("reason %q leaks the policy", d.Reason)
			}
			if len(res) != 0 {
				t.Fatalf("search kept %v", res)
			}
		})
	}
}

func TestCallFilterWithoutServerName(t *testing.T) {
	a := newAC(t, `{"allow_servers": ["everything"]}`)
	err := exttest.Call(a, context.Background(), &extension.CallRequest{ToolName: "memory__read_graph"})
	if d, ok := extension.AsDenial(err); !ok || d.Rule != "access_control.allow_servers" {
		t.Fatalf("got %v", err)
	}
}

func TestSearchFilterKeepsOrderAndInput(t *testing.T) {
	a := newAC(t, `{"deny_patterns": ["*__delete_*"]}`)
	in := []extension.SearchResult{
		{Name: "fs__read_file", Server: "fs"},
		{Name: "fs__delete_file", Server: "fs"},
		{Name: "fs__write_file", Server: "fs"},
	}
	orig := slices.Clone(in)
	out, err := a.FilterVisible(context.Background(), &extension.VisibilityRequest{}, in)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range out {
		names = append(names, r.Name)
	}
	if want := []string{"fs__read_file", "fs__write_file"}; !slices.Equal(names, want) {
		t.Fatalf("got %v, want %v", names, want)
	}
	if !slices.Equal(in, orig) {
		t.Fatal("the filter modified its input slice")
	}
}

func TestRegistered(t *testing.T) {
	f, ok := extension.Lookup(Key)
	if !ok {
		t.Fatal("access_control is not registered")
	}
	e, err := f(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := extension.ValidateID(e.ID()); err != nil {
		t.Fatal(err)
	}
	if extension.PhaseOf(e) != extension.PhaseAuthorize {
		t.Fatalf("phase %v", extension.PhaseOf(e))
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }

// TestConcurrent runs the filters from many goroutines (meaningful under -race).
func TestConcurrent(t *testing.T) {
	a := newAC(t, `{"deny_patterns": ["*__delete_*"], "allow_servers": ["fs"]}`)
	call, srch := exttest.CallFunc(a), a.FilterVisible
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 200 {
				_ = call(context.Background(), &extension.CallRequest{ToolName: "fs__delete_x", ServerName: "fs"})
				_, _ = srch(context.Background(), &extension.VisibilityRequest{}, []extension.SearchResult{{Name: "fs__a", Server: "fs"}})
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestAllowList(t *testing.T) {
	a, err := FromConfig(Config{Allow: []AllowEntry{{Tool: "fs__read_file"}, {Tool: "Mem__Read_Graph"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"fs__read_file": true, "mem__read_graph": true, "fs__write_file": false, "other__read_file": false} {
		server, _, _ := strings.Cut(name, "__")
		if got := a.Check(server, name) == nil; got != want {
			t.Errorf("Check(%s) allowed=%v", name, got)
		}
	}
	if d, _ := extension.AsDenial(a.Check("fs", "fs__write_file")); d == nil || d.Rule != "access_control.allow" {
		t.Fatalf("rule: %v", d)
	}
	if _, err := FromConfig(Config{Allow: []AllowEntry{{Tool: "read_file"}}}); err == nil {
		t.Fatal("unqualified name accepted")
	}
}

// The list filter keeps every tool but reports the ones Check refuses, so
// load_mcp_server does not count them as usable; the reason gives nothing
// of the configured names or patterns away.
func TestListFilterWithholds(t *testing.T) {
	a := newAC(t, `{"deny_patterns": ["*__delete_*"], "allow_servers": ["github", "weather"]}`)
	var got [][3]string
	req := &extension.ListRequest{ServerName: "github", Withheld: func(tool, rule, reason string) { got = append(got, [3]string{tool, rule, reason}) }}
	tools := []*mcp.Tool{{Name: "delete_repo"}, {Name: "list_repos"}}
	kept, err := a.FilterList(context.Background(), req, tools)
	if err != nil || len(kept) != 2 {
		t.Fatalf("kept %v, %v; want every tool kept", kept, err)
	}
	if len(got) != 1 || got[0][0] != "delete_repo" || got[0][1] != "access_control.deny_patterns" || strings.Contains(got[0][2], "delete_*") {
		t.Fatalf("withheld %q", got)
	}
	got = nil
	req.ServerName = "evil"
	a.FilterList(context.Background(), req, tools)
	if len(got) != 2 || got[0][1] != "access_control.allow_servers" || strings.Contains(got[0][2], "github") {
		t.Fatalf("server outside allow_servers: withheld %q", got)
	}
}

// Two teams behind one gateway: each group finds and calls its own tools,
// a plain name in allow is for everyone, a caller without a principal
// (stdio) gets only the plain names, and deny still wins over a grant.
func TestAllowGrantsByGroupAndPrincipal(t *testing.T) {
	a := newAC(t, `{"allow": ["mem__read_graph",
		{"group": "dev", "tools": ["github__*"]},
		{"group": "ops", "tools": ["fs__*"]},
		{"principal": "carol", "tools": ["fs__read_file"]}],
		"deny": ["github__delete_repo"]}`)
	dev := &extension.Principal{Subject: "alice", Issuer: "https://id", Groups: []string{"dev"}}
	ops := &extension.Principal{Subject: "bob", Issuer: "https://id", Groups: []string{"ops"}}
	carol := &extension.Principal{Subject: "carol", Issuer: extension.APIKeyIssuer}
	tools := []string{"github__list_repos", "github__delete_repo", "fs__read_file", "fs__write_file", "mem__read_graph"}
	for _, tc := range []struct {
		who  *extension.Principal
		want []string
	}{
		{dev, []string{"github__list_repos", "mem__read_graph"}},
		{ops, []string{"fs__read_file", "fs__write_file", "mem__read_graph"}},
		{carol, []string{"fs__read_file", "mem__read_graph"}},
		{nil, []string{"mem__read_graph"}},
	} {
		ctx := context.Background()
		if tc.who != nil {
			ctx = extension.WithPrincipal(ctx, tc.who)
		}
		var results []extension.SearchResult
		for _, n := range tools {
			server, tool, _ := strings.Cut(n, "__")
			results = append(results, extension.SearchResult{Name: n, Server: server, Tool: tool})
		}
		shown, err := a.FilterVisible(ctx, &extension.VisibilityRequest{}, results)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range shown {
			got = append(got, r.Name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s finds %v; want %v", tc.who.ID(), got, tc.want)
		}
		for _, n := range tools {
			server, tool, _ := strings.Cut(n, "__")
			err := exttest.Call(a, ctx, &extension.CallRequest{ToolName: n, ServerName: server, Tool: tool})
			if allowed := err == nil; allowed != slices.Contains(tc.want, n) {
				t.Errorf("%s calling %s: %v", tc.who.ID(), n, err)
			}
		}
	}
	// A listing has no caller: only what nobody may call is withheld.
	var withheld []string
	req := &extension.ListRequest{ServerName: "github", Withheld: func(tool, rule, reason string) { withheld = append(withheld, tool) }}
	a.FilterList(context.Background(), req, []*mcp.Tool{{Name: "list_repos"}, {Name: "delete_repo"}})
	if strings.Join(withheld, ",") != "delete_repo" {
		t.Fatalf("withheld %v; want [delete_repo]", withheld)
	}
	req.ServerName = "other"
	withheld = nil
	a.FilterList(context.Background(), req, []*mcp.Tool{{Name: "x"}})
	if len(withheld) != 1 {
		t.Fatalf("a tool no grant covers is not withheld: %v", withheld)
	}

	for _, bad := range []struct{ json, want string }{
		{`{"allow": [{"group": "dev"}]}`, `allow[0]: grant without "tools"`},
		{`{"allow": [{"group": "dev", "principal": "x", "tools": ["a__*"]}]}`, `names one "principal" or one "group"`},
		{`{"allow": [{"tools": ["a__*"]}]}`, `allow[0]`},
		{`{"allow": [{"group": "dev", "tool": ["a__*"]}]}`, `unknown`},
		{`{"allow": [{"group": "dev", "tools": [""]}]}`, `allow[0].tools[0]: empty pattern`},
		{`{"allow": [42]}`, `want a qualified tool name or`},
	} {
		if _, err := New(json.RawMessage(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v; want %q", bad.json, err, bad.want)
		}
	}
}
