package rego

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	"github.com/toolgate/toolgate/extensions/internal/readme"
)

// examples is the folder of the shipped example policies.
var examples = filepath.Join("..", "..", "examples")

// load provisions a policy from path, relative to dir.
func load(t testing.TB, dir, path string) *Policy {
	t.Helper()
	raw, _ := json.Marshal(path)
	e, err := New(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := exttest.Provision(e, context.Background(), extension.Host{ConfigDir: dir}); err != nil {
		t.Fatalf("provision %s: %v", path, err)
	}
	if err := e.(extension.Validator).Validate(); err != nil {
		t.Fatal(err)
	}

	return e.(*Policy)
}

// writePolicy writes src to a .rego file in a new folder and returns the folder.
func writePolicy(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

type callCase struct {
	name       string
	tool       string
	args       map[string]any
	wantAllow  bool
	wantReason string // substring, for denials
}

func runCases(t *testing.T, p *Policy, cases []callCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			server, tool, _ := strings.Cut(c.tool, "__")
			err := exttest.Call(p, context.Background(), (&extension.CallRequest{ToolName: c.tool, ServerName: server, Tool: tool}).WithArguments(c.args))
			if c.wantAllow {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				return
			}
			d, ok := extension.AsDenial(err)
			if !ok || d.Rule != Rule {
				t.Fatalf("want a denial by %s, got %v", Rule, err)
			}
			if !strings.Contains(d.Reason, c.wantReason) {
				t.Fatalf("reason %q, want it to contain %q", d.Reason, c.wantReason)
			}
		})
	}
}

func TestDenyDangerous(t *testing.T) {
	p := load(t, examples, "policies/deny_dangerous.rego")
	if p.Package() != "data.toolgate.deny_dangerous" {
		t.Fatalf("package %s", p.Package())
	}
	runCases(t, p, []callCase{
		{"read", "filesystem__read_file", map[string]any{"path": "a"}, true, ""},
		{"echo", "everything__echo", map[string]any{"message": "delete everything"}, true, ""},
		{"delete", "github__delete_repo", nil, false, "delete or drop"},
		{"drop", "db__drop_table", map[string]any{"table": "users"}, false, "delete or drop"},
		{"camel", "files__deleteFile", nil, false, "delete or drop"},
		{"upper", "db__DROP_TABLE", nil, false, "delete or drop"},
		{"hyphen", "db__drop-table", nil, false, "delete or drop"},
		{"dropdown", "ui__dropdown_select", nil, true, ""},
		{"undelete", "trash__undelete", nil, true, ""},
	})
}

func TestNoCloseIssue(t *testing.T) {
	p := load(t, examples, "policies/no_close_issue.rego")
	runCases(t, p, []callCase{
		{"update title", "github__update_issue", map[string]any{"issue_number": json.Number("7"), "title": "t"}, true, ""},
		{"reopen", "github__update_issue", map[string]any{"issue_number": 7, "state": "open"}, true, ""},
		{"close", "github__update_issue", map[string]any{"issue_number": 7, "state": "closed"}, false, "closing issues"},
		{"close upper", "github__update_issue", map[string]any{"state": "Closed"}, false, "closing issues"},
		{"issue_write close", "github__issue_write", map[string]any{"method": "update", "state": "closed"}, false, "closing issues"},
		{"issue_write update", "github__issue_write", map[string]any{"method": "update", "body": "b"}, true, ""},
		{"close_issue tool", "gh__close_issue", map[string]any{"issue_number": 1}, false, "closing issues"},
		{"other tool", "github__create_issue", map[string]any{"state": "closed"}, true, ""},
		{"not github", "everything__echo", map[string]any{"message": "x"}, true, ""},
		// A state of the wrong type makes lower() fail: with strict
		// built-in errors that is an evaluation error, so the call is
		// refused (fail closed) rather than allowed.
	})
	err := exttest.Call(p, context.Background(), (&extension.CallRequest{ToolName: "github__update_issue"}).WithArguments(map[string]any{"state": 3}))
	if err == nil {
		t.Fatal("a non-string state was allowed; want an evaluation error (fail closed)")
	}
}

// TestRegoTests runs the examples' _test.rego files, as `opa test` would.
func TestRegoTests(t *testing.T) {
	results, err := tester.Run(context.Background(), filepath.Join(examples, "policies"))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no Rego tests found")
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("%s.%s: %v %s", r.Package, r.Name, r.Error, r.Output)
		}
	}
	t.Logf("%d Rego tests", len(results))
}

func TestFailClosed(t *testing.T) {
	tests := []struct {
		name, src  string
		wantDenial bool   // a Denial by rego_policy (vs an evaluation error)
		want       string // substring of the error
	}{
		{"undefined allow", "package p\nallow if input.tool_name == \"x__ok\"\n", true, DefaultReason},
		{"false allow without reason", "package p\ndefault allow := false\n", true, DefaultReason},
		{"reason not a string", "package p\ndefault allow := false\ndeny_reason := 3\n", true, DefaultReason},
		{"custom reason", "package p\ndefault allow := false\ndeny_reason := \"no echo today\"\n", true, "no echo today"},
		{"non-boolean allow", "package p\nallow := \"yes\"\n", false, "not a boolean"},
		{"conflicting allow", "package p\nallow := true\nallow := false if input.tool_name\n", false, "evaluate data.p.allow"},
		{"builtin error", "package p\ndefault allow := false\nallow if not bad\nbad if regex.match(input.arguments.re, \"x\")\n", false, "evaluate data.p.allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, writePolicy(t, tt.src), "p.rego")
			err := exttest.Call(p, context.Background(), (&extension.CallRequest{
				ToolName: "x__y", ServerName: "x", Tool: "y",
			}).WithArguments(map[string]any{"re": "(("}))
			if err == nil {
				t.Fatal("allowed; want refused")
			}
			d, isDenial := extension.AsDenial(err)
			if isDenial != tt.wantDenial {
				t.Fatalf("got %v (denial: %v), want denial %v", err, isDenial, tt.wantDenial)
			}
			msg := err.Error()
			if isDenial {
				msg = d.Reason
			}
			if !strings.Contains(msg, tt.want) {
				t.Fatalf("got %q, want it to contain %q", msg, tt.want)
			}
		})
	}
}

func TestInput(t *testing.T) {
	const src = `package toolgate.probe

default allow := false

allow if {
	input.tool_name == "srv__t"
	input.server_name == "srv"
	input.tool == "t"
	input.arguments.n == 1.5
	input.arguments.nested.list[1] == "b"
	input.session == "s1"
	input.principal == "alice"
}
`
	p := load(t, writePolicy(t, src), "p.rego")
	req := (&extension.CallRequest{
		ToolName: "srv__t", ServerName: "srv", Tool: "t", Session: "s1", Principal: "alice",
	}).WithArguments(map[string]any{"n": json.Number("1.5"), "nested": map[string]any{"list": []any{"a", "b"}}})
	if err := p.Decide(context.Background(), req); err != nil {
		t.Fatalf("probe policy refused: %v", err)
	}
	req.Principal = ""
	if err := p.Decide(context.Background(), req); err == nil {
		t.Fatal("without a principal the probe should not allow")
	}
}

func TestProvisionErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"parse error", "package p\nallow if {\n", "rego_parse_error"},
		{"compile error", "package p\nallow if x == 1\n", "rego_unsafe_var_error"},
		{"type error", "package p\nallow if count(1) == 1\n", "rego_type_error"},
		{"no allow", "package p\ndeny if true\n", "defines no allow rule"},
		{"empty", "", "empty module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePolicy(t, tt.src)
			e, err := New(json.RawMessage(`"p.rego"`))
			if err != nil {
				t.Fatal(err)
			}
			err = exttest.Provision(e, context.Background(), extension.Host{ConfigDir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "p.rego") {
				t.Fatalf("got %v, want an error naming p.rego and containing %q", err, tt.want)
			}
		})
	}
	e, _ := New(json.RawMessage(`"missing.rego"`))
	if err := exttest.Provision(e, context.Background(), extension.Host{ConfigDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "read policy missing.rego") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, raw := range []string{`{"path": "a.rego"}`, `""`, `3`, `["a.rego"]`, `null`} {
		if _, err := New(json.RawMessage(raw)); err == nil {
			t.Errorf("New(%s): want an error", raw)
		}
	}
}

func TestAbsolutePath(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join(examples, "policies", "deny_dangerous.rego"))
	if err != nil {
		t.Fatal(err)
	}
	load(t, t.TempDir(), abs)
}

func TestConcurrentCalls(t *testing.T) {
	p := load(t, examples, "policies/no_close_issue.rego")
	f := exttest.CallFunc(p)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				state := "open"
				if (i+j)%2 == 0 {
					state = "closed"
				}
				err := f(context.Background(), (&extension.CallRequest{ToolName: "github__update_issue"}).WithArguments(map[string]any{"state": state}))
				if (err == nil) != (state == "open") {
					t.Errorf("state %s: %v", state, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRegistered(t *testing.T) {
	f, ok := extension.Lookup(Key)
	if !ok {
		t.Fatal("rego_policy is not registered")
	}
	e, err := f(json.RawMessage(`"x.rego"`))
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

// TestReadmeExamples checks that the README's examples parse and that the
// policies they name exist under examples/ and compile.
func TestReadmeExamples(t *testing.T) {
	ex, err := readme.Examples("README.md", Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) == 0 {
		t.Fatal("README.md has no JSON example of filters.rego_policy")
	}
	for i, raw := range ex {
		e, err := New(raw)
		if err != nil {
			t.Errorf("example %d: %v\n%s", i+1, err, raw)
			continue
		}
		if err := exttest.Provision(e, context.Background(), extension.Host{ConfigDir: examples}); err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
	}
}

// BenchmarkRegoCall measures one call through the rego_policy call filter
// with the shipped no_close_issue policy: building the input from the
// arguments, evaluating allow, and (for the denied shape) deny_reason.
func BenchmarkRegoCall(b *testing.B) {
	p := load(b, examples, "policies/no_close_issue.rego")
	f := exttest.CallFunc(p)
	for _, bc := range []struct {
		name  string
		state string
	}{{"allow", "open"}, {"deny", "closed"}} {
		b.Run(bc.name, func(b *testing.B) {
			req := (&extension.CallRequest{
				ToolName: "github__update_issue", ServerName: "github", Tool: "update_issue", Session: "conn-1",
			}).WithArguments(map[string]any{"owner": "o", "repo": "r", "issue_number": json.Number("7"), "title": "new title", "body": "some text", "state": bc.state})
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				err := f(ctx, req)
				if (err == nil) != (bc.state == "open") {
					b.Fatal(err)
				}
			}
		})
	}
}

// A policy decides by the caller's groups and claims, as the HTTP
// frontend's auth established them.
func TestPolicyByGroupAndClaim(t *testing.T) {
	dir := writePolicy(t, `package team
default allow := false
allow if { "dev" in input.groups; input.claims.tenant == "acme" }
allow if input.principal == "ci-bot"
`)
	p := load(t, dir, "p.rego")
	req := func() *extension.CallRequest {
		return &extension.CallRequest{ToolName: "gh__list", ServerName: "gh", Tool: "list"}
	}
	decide := func(pr *extension.Principal) error {
		ctx := context.Background()
		r := req()
		if pr != nil {
			ctx = extension.WithPrincipal(ctx, pr)
			r.Principal = pr.ID()
		}
		return exttest.Call(p, ctx, r)
	}
	dev := &extension.Principal{Subject: "alice", Issuer: "https://id", Groups: []string{"dev"}, Claims: map[string]any{"tenant": "acme"}}
	if err := decide(dev); err != nil {
		t.Fatalf("dev of acme: %v", err)
	}
	other := &extension.Principal{Subject: "eve", Issuer: "https://id", Groups: []string{"dev"}, Claims: map[string]any{"tenant": "evil"}}
	if err := decide(other); err == nil {
		t.Fatal("dev of another tenant allowed")
	}
	if err := decide(&extension.Principal{Subject: "ci-bot", Issuer: extension.APIKeyIssuer}); err != nil {
		t.Fatalf("ci-bot: %v", err)
	}
	if err := decide(nil); err == nil {
		t.Fatal("no principal allowed")
	}
}
