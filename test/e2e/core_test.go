package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStdioSearchThenCall(t *testing.T) {
	t.Parallel()
	cs, logs := startStdio(t, coreConfig(t, defaultServers(t)))
	tools, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"call_tool", "load_mcp_server", "search_tools"}; !slices.Equal(names, want) {
		t.Fatalf("tools/list = %v, want exactly %v", names, want)
	}

	// Before any search, the gate refuses.
	res := call(t, cs, "call_tool", map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": "hi"}})
	if !res.IsError || !strings.Contains(text(res), "search_tools") {
		t.Fatalf("call before search: want an isError refusal mentioning search_tools, got %+v: %s", res.IsError, text(res))
	}

	got := search(t, cs, "echo a message back", 5)
	if !slices.Contains(got, "everything__echo") {
		t.Fatalf("search for echo = %v, want everything__echo", got)
	}
	res = call(t, cs, "call_tool", map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": "hello gate"}})
	if res.IsError || !strings.Contains(text(res), "hello gate") {
		t.Fatalf("call after search: %v %s", res.IsError, text(res))
	}
	noPanic(t, logs.String())
}

// TestDefaultSearchRightAfterStartup searches with the default config (hybrid
// search) as soon as the gateway answers, the way a client does. Regression:
// while the dense indexer embedded a batch it had taken off its queue, the
// index reported itself complete and dropped the tools without a vector
// instead of matching them by keyword, so early searches found nothing.
func TestDefaultSearchRightAfterStartup(t *testing.T) {
	t.Parallel()
	cs, logs := startStdio(t, writeConfig(t, everythingOnly(), nil))
	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("first search for echo = %v, want everything__echo", got)
	}
	wantOK(t, "call after search", callTool(t, cs, "everything__echo", map[string]any{"message": "early"}), "early")
	noPanic(t, logs.String())
}

// ---- helpers shared by the core_*_test.go files ----

// coreConfig writes a config with the given servers and lexical search.
// The core tests are about the gate, the upstreams and the meta-tools, not
// ranking: lexical search is deterministic, needs no model and ranks the
// queries they use the same way every run.
func coreConfig(t *testing.T, servers map[string]any) string {
	t.Helper()
	p := writeConfig(t, servers, nil)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["search"] = map[string]any{"mode": "lexical"}
	if err := os.WriteFile(p, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// everythingOnly is a config with server-everything alone, the cheapest
// useful upstream.
func everythingOnly() map[string]any {
	return map[string]any{"everything": stdioServer("everything")}
}

// callTool calls an upstream tool through call_tool.
func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	return call(t, cs, "call_tool", map[string]any{"tool_name": tool, "arguments": args})
}

// wantRefused fails unless res is an isError result whose text contains
// every one of subs (case-insensitively).
func wantRefused(t *testing.T, what string, res *mcp.CallToolResult, subs ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("%s: want an isError result, got success: %s", what, text(res))
	}
	t.Logf("%s: refused: %s", what, text(res))
	low := strings.ToLower(text(res))
	for _, s := range subs {
		if !strings.Contains(low, strings.ToLower(s)) {
			t.Fatalf("%s: refusal %q does not mention %q", what, text(res), s)
		}
	}
}

// wantOK fails unless res is a success whose text contains every sub.
func wantOK(t *testing.T, what string, res *mcp.CallToolResult, subs ...string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: want success, got isError: %s", what, text(res))
	}
	for _, s := range subs {
		if !strings.Contains(text(res), s) {
			t.Fatalf("%s: result %q does not contain %q", what, text(res), s)
		}
	}
}

// noPanic fails if toolgate's logs show a Go panic or a data race.
func noPanic(t *testing.T, logs string) {
	t.Helper()
	for _, bad := range []string{"panic:", "WARNING: DATA RACE"} {
		if strings.Contains(logs, bad) {
			t.Fatalf("toolgate logs contain %q:\n%s", bad, logs)
		}
	}
}

// newMarker returns a unique value to put in a server's env, so the test can
// find that server's processes (and their children) in /proc.
func newMarker(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "e2e-" + hex.EncodeToString(b[:])
}

// markerVar is the environment variable newMarker values are put in.
const markerVar = "TOOLGATE_E2E_MARKER"

// withMarker returns a copy of a server entry whose env also sets
// markerVar=marker.
func withMarker(entry map[string]any, marker string) map[string]any {
	out := map[string]any{}
	for k, v := range entry {
		out[k] = v
	}
	env := map[string]any{}
	if old, ok := entry["env"].(map[string]any); ok {
		for k, v := range old {
			env[k] = v
		}
	}
	env[markerVar] = marker
	out["env"] = env
	return out
}

// markedPIDs lists the live (non-zombie) processes whose environment holds
// markerVar=marker.
func markedPIDs(t *testing.T, marker string) []int {
	t.Helper()
	want := []byte(markerVar + "=" + marker)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, want) }) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// The state follows the parenthesised command name.
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitFor polls cond until it holds or the deadline passes; it is a bound on
// waiting for something asynchronous, not a timing assertion.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func itoa(i int) string { return strconv.Itoa(i) }
