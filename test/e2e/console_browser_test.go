package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumPath is Debian's Chromium, the only browser the console tests
// use (never one downloaded by Playwright).
const chromiumPath = "/usr/bin/chromium"

// consoleArtifacts is where the browser test saves its screenshots:
// $TOOLGATE_ARTIFACTS/console, by default artifacts/console in the
// checkout (CI keeps the folder).
func consoleArtifacts() string {
	if d := os.Getenv("TOOLGATE_ARTIFACTS"); d != "" {
		return filepath.Join(d, "console")
	}
	return filepath.Join(repoRoot, "artifacts", "console")
}

// TestConsoleBrowser loads the web console in headless Chromium against a
// gateway running the npm servers (everything, memory as a lazy server)
// and the canary server, and drives it with test/console/console.mjs: the
// servers are listed and one starts with its button; a call made through
// an MCP client appears live with its pipeline stages; a call refused by
// a changed pin shows its reason; the Trust button on the Pins page lets
// the next call through; every page is captured at 1280x800 and 390x844;
// no page or SSE message shows the secret the canary server was given.
// With DOCS_DIR set (make screenshots) the desktop captures also go there.
func TestConsoleBrowser(t *testing.T) {
	for _, need := range []string{chromiumPath, filepath.Join(repoRoot, "node_modules", "playwright-core", "package.json")} {
		if _, err := os.Stat(need); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: CI must run the browser test (`make deps` installs chromium with apt as root, and playwright-core)", need)
			}
			t.Skipf("%s is missing (apt-get install chromium; npm ci); skipping the browser test", need)
		}
	}
	secret := newSecret(t, "cnsl")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("CANARY_VALUE="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mem := stdioServer("memory")
	mem["lazy"] = true
	cfg := filepath.Join(dir, "config.json")
	writeJSON(t, cfg, map[string]any{
		"search": map[string]any{"mode": "lexical"},
		"audit":  map[string]any{"record_arguments": true},
		// Hides memory's delete tools: the search playground shows them
		// as hidden by access_control.
		// output_poisoning adds a step to each call's trace.
		"filters": map[string]any{"access_control": map[string]any{"deny_patterns": []string{"*__delete_*"}}, "output_poisoning": map[string]any{}},
		"mcpServers": map[string]any{
			"everything": stdioServer("everything"),
			"memory":     mem,
			"canary":     map[string]any{"command": helperBinary(t, "canary", "./test/servers/canary"), "env": map[string]any{"CANARY_SECRET": "$CANARY_VALUE"}},
		},
	})
	// A pin for everything's echo that the server no longer matches (as
	// after an upgrade that reworded it): calls to it are refused until
	// the operator trusts the new definition.
	state := t.TempDir()
	writeJSON(t, filepath.Join(state, "pins.json"), map[string]any{
		"version": 1,
		"tools": map[string]any{"everything": map[string]any{"echo": map[string]any{
			"hash":      strings.Repeat("1", 64),
			"pinned_at": "2026-01-01T00:00:00Z",
			"definition": map[string]any{
				"description": "Echoes back the input string, unchanged",
				"inputSchema": map[string]any{"properties": map[string]any{"message": map[string]any{"description": "Message to echo", "type": "string"}}, "type": "object"},
				"name":        "echo",
			},
		}}},
	})
	g := startHTTP(t, cfg, "--state-dir", state)
	base := strings.TrimSuffix(g.URL, "/mcp")
	if !strings.Contains(g.Logs.String(), `console=`+base+`/ui/`) {
		t.Errorf("the startup log line does not link the console:\n%s", g.Logs)
	}
	if out, err := exec.Command(binPath, "status", "--addr", base).CombinedOutput(); err != nil || !strings.Contains(string(out), "console: "+base+"/ui/") {
		t.Errorf("toolgate status does not link the console (%v):\n%s", err, out)
	}
	shots := consoleArtifacts()
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "test", "console", "console.mjs"))
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+base+"/ui/", "MCP_URL="+g.URL, "CANARY="+secret, "SHOT_DIR="+shots, "CHROMIUM="+chromiumPath)
	out, err := cmd.CombinedOutput()
	t.Logf("browser test (%s):\n%s", time.Since(start).Round(100*time.Millisecond), out)
	if err != nil {
		t.Fatalf("console.mjs: %v", err)
	}
	for _, size := range []string{"desktop", "phone"} {
		for _, p := range []string{"servers", "activity", "detections", "pins", "search", "charts"} {
			if fi, err := os.Stat(filepath.Join(shots, size+"-"+p+".png")); err != nil || fi.Size() < 1000 {
				t.Errorf("screenshot %s-%s: %v", size, p, err)
			}
		}
	}
	if strings.Contains(g.Logs.String(), secret) {
		t.Error("the gateway's log holds the secret")
	}
	// The JSON the pages are drawn from holds no secret either.
	for _, p := range []string{"api/servers", "api/events", "api/detections", "api/pins", "api/charts", "api/search?q=leak+" + secret} {
		resp, err := http.Get(base + "/ui/" + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(bufio.NewReader(resp.Body))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), secret) {
			t.Errorf("GET /ui/%s: %s, holds the secret: %v", p, resp.Status, strings.Contains(string(b), secret))
		}
	}
}
