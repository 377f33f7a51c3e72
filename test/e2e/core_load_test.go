package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestLoadMCPServer(t *testing.T) {
	t.Parallel()
	remoteURL := startEverythingHTTP(t)
	// No configured servers: everything the session can reach is loaded.
	// The same server is loaded twice under two names below, which the
	// (default-on) shadowing protection would rightly block; it has its own
	// tests (defsec_test.go).
	cfg := coreConfig(t, map[string]any{})
	setFilters(t, cfg, map[string]any{"shadowing": false, "load_control": map[string]any{"deny_private_networks": false}})
	cs, logs := startStdio(t, cfg)

	if got := search(t, cs, "echo a message back", 5); len(got) != 0 {
		t.Fatalf("search before any server is loaded = %v, want nothing", got)
	}
	load := func(name, url string) *mcp.CallToolResult {
		t.Helper()
		return call(t, cs, "load_mcp_server", map[string]any{"server_name": name, "url": url})
	}

	wantOK(t, "load remote", load("remote", remoteURL), "remote")
	wantRefused(t, "remote__echo before search", callTool(t, cs, "remote__echo", map[string]any{"message": "hi"}), "search_tools")
	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "remote__echo") {
		t.Fatalf("search after load = %v, want remote__echo", got)
	}
	wantOK(t, "remote__echo after search", callTool(t, cs, "remote__echo", map[string]any{"message": "from afar"}), "Echo: from afar")

	// The same name twice.
	wantRefused(t, "load remote twice", load("remote", remoteURL), "already", "remote")
	// Bad names.
	wantRefused(t, `name "a__b"`, load("a__b", remoteURL), "__")
	wantRefused(t, `name ""`, load("", remoteURL), "empty")
	wantRefused(t, `name "a b"`, load("a b", remoteURL), "not allowed")
	wantRefused(t, `name "../x"`, load("../x", remoteURL), "not allowed")
	// Bad URLs.
	for _, u := range []string{"file:///etc/passwd", "ftp://x", "", "not a url", "javascript:alert(1)", "/mcp"} {
		wantRefused(t, "url "+u, load("bad", u), "scheme must be http or https")
	}
	wantRefused(t, "url http://", load("bad", "http://"), "no host")
	// Nothing listens there.
	dead := "http://" + freeAddr(t) + "/mcp"
	wantRefused(t, "unreachable url", load("gone", dead), "could not connect", `"gone"`, "connection refused")

	// Missing or mistyped arguments.
	wantRefused(t, "load without arguments", call(t, cs, "load_mcp_server", map[string]any{}), "load_mcp_server")
	wantRefused(t, "load with a number as url", call(t, cs, "load_mcp_server", map[string]any{"server_name": "n", "url": 5}), "url")
	wantRefused(t, "load with an unknown argument", call(t, cs, "load_mcp_server", map[string]any{"server_name": "n", "url": remoteURL, "headers": map[string]any{}}), "headers")

	// The gateway keeps serving: the loaded server still works, and the
	// failures left no half-registered server behind.
	if got := search(t, cs, "add two numbers sum", 5); !slices.Contains(got, "remote__get-sum") {
		t.Fatalf("search after the failed loads = %v, want remote__get-sum", got)
	}
	wantOK(t, "remote__get-sum", callTool(t, cs, "remote__get-sum", map[string]any{"a": 2, "b": 3}), "is 5.")
	for _, name := range []string{"gone", "bad"} {
		if got := search(t, cs, name, 50); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, name+"__") }) {
			t.Errorf("failed load %q left tools behind: %v", name, got)
		}
	}
	// A name whose load failed can be used again.
	wantOK(t, "load under the name that failed", load("gone", remoteURL), "gone")
	if got := search(t, cs, "echo a message back", 10); !slices.Contains(got, "gone__echo") {
		t.Fatalf("search after reloading = %v, want gone__echo", got)
	}
	wantOK(t, "gone__echo", callTool(t, cs, "gone__echo", map[string]any{"message": "back"}), "Echo: back")
	noPanic(t, logs.String())
}

// setFilters replaces the filters object of the config at path.
func setFilters(t *testing.T, path string, filters map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["filters"] = withEgressDefault(filters)
	if err := os.WriteFile(path, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
