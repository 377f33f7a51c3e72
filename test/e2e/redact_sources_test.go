package e2e

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactCredentialSources covers issue 14 item 10 in the default mode:
// a gateway variable passed on through env_allow that looks like a secret
// but has no KEY/TOKEN word in its name (GH_PAT), URL-shaped secrets
// (DATABASE_URL with a password, a Slack webhook), a .env value shorter
// than six characters, and a key in a configured server's URL (which the
// connection error quotes, in /status and in the log). None may reach the
// client, /status or the log.
func TestRedactCredentialSources(t *testing.T) {
	pat := newSecret(t, "ghp_")
	dbpw := newSecret(t, "pw")
	hook := "https://hooks.slack.com/services/T00/B00/" + strings.ToUpper(newSecret(t, "Q"))
	short := "zq9x"
	urlKey := newSecret(t, "qk")
	t.Setenv("GH_PAT", pat)
	t.Setenv("DATABASE_URL", "postgres://app:"+dbpw+"@db.internal:5432/app")
	t.Setenv("SLACK_WEBHOOK_URL", hook)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SHORT_VALUE="+short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The remote server answers at first (so its tools are catalogued),
	// then goes away: the call error quotes its URL.
	remoteAddr := freeAddr(t)
	remote := exec.Command(helperBinary(t, "canary", "./test/servers/canary"), "-http", remoteAddr)
	remote.Env = append(os.Environ(), "CANARY_SECRET=unrelated-canary-value")
	remote.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := remote.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Process.Kill(); _ = remote.Wait() })
	if !waitFor(20*time.Second, func() bool {
		c, err := net.Dial("tcp", remoteAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatal("the remote canary did not listen")
	}
	everything := stdioServer("everything")
	everything["env"] = map[string]any{"SHORT": "$SHORT_VALUE"}
	everything["env_allow"] = []string{"GH_PAT", "DATABASE_URL", "SLACK_WEBHOOK_URL"}
	cfg := filepath.Join(dir, "config.json")
	writeJSON(t, cfg, map[string]any{
		"search": map[string]any{"mode": "lexical"},
		"mcpServers": map[string]any{
			"everything": everything,
			"remote":     map[string]any{"url": "http://" + remoteAddr + "/mcp?api_key=" + urlKey},
		},
	})
	c, logs := connectCanaryHTTP(t, cfg)
	ctx := ctxT(t)
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "get-env environment variables", "top_k": 5}})
	if err != nil || res.IsError {
		t.Fatalf("search: %v %v", err, res)
	}
	res, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "everything__get-env"}})
	if err != nil || res.IsError {
		t.Fatalf("get-env: %v %v", err, res)
	}
	env := text(res)
	// The child did get the variables (the test is not vacuous).
	for _, name := range []string{"GH_PAT", "DATABASE_URL", "SLACK_WEBHOOK_URL", "SHORT"} {
		if !strings.Contains(env, name) {
			t.Fatalf("get-env lacks %s: %s", name, env)
		}
	}
	// A call to the remote server once it is gone: the error names the
	// server's URL, never its key.
	res, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "fails as a tool", "top_k": 5}})
	if err != nil || res.IsError || !strings.Contains(text(res)+fmtJSON(res.StructuredContent), "remote__fail_tool") {
		t.Fatalf("search for the remote tool: %v %v", err, res)
	}
	_ = remote.Process.Kill()
	_ = remote.Wait()
	res, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "remote__fail_tool"}})
	if err != nil || !res.IsError {
		t.Fatalf("call to a dead remote: %v %v", err, res)
	}
	callErr := text(res)
	t.Logf("call error: %s", callErr)
	// /status once the remote server's connection has failed.
	base := strings.TrimSuffix(connectBase(t, logs), "/mcp")
	var status string
	if !waitFor(30*time.Second, func() bool {
		status = httpGet(t, base+"/status")
		return strings.Contains(status, `"last_error"`)
	}) {
		t.Fatalf("the remote server never failed: %s", status)
	}
	t.Logf("status: %s", status)
	listing, err := exec.Command(binPath, "servers", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(listing), "api_key=[REDACTED]") {
		t.Fatalf("toolgate servers: %v\n%s", err, listing)
	}
	for what, text := range map[string]string{"the client": c.wire.String(), "the call error": callErr, "/status": status, "the log": logs.String(), "toolgate servers": string(listing)} {
		for name, secret := range map[string]string{"GH_PAT": pat, "DATABASE_URL password": dbpw, "Slack webhook": hook, "short .env value": short, "URL query key": urlKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the %s: %s", what, name, excerpt(text, secret))
			}
		}
	}
}

// TestRedactPoisonedToolName covers issue 14 item 14: a tool whose name
// holds a known secret is refused (not catalogued, not searchable), the
// refusal is recorded without the secret, and no file the gateway writes
// (audit log, catalogue cache, pins) holds the name in clear.
func TestRedactPoisonedToolName(t *testing.T) {
	secret := newSecret(t, "cnry")
	bin := helperBinary(t, "canary", "./test/servers/canary")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("CANARY_VALUE="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.json")
	writeJSON(t, cfg, map[string]any{
		"search": map[string]any{"mode": "lexical"},
		"mcpServers": map[string]any{
			"canary": map[string]any{"command": bin, "env": map[string]any{"CANARY_SECRET": "$CANARY_VALUE", "CANARY_POISON_NAME": "1"}},
		},
	})
	state := t.TempDir()
	g := startHTTP(t, cfg, "--state-dir", state)
	cs := connectHTTP(t, g.URL, "")
	names := search(t, cs, "looks up a record; fails with a protocol error", 10)
	if len(names) == 0 {
		t.Fatal("search found nothing: the canary's other tools should be there")
	}
	for _, n := range names {
		if strings.Contains(n, "REDACTED") || strings.HasPrefix(n, "canary__get_") {
			t.Fatalf("the poisoned tool was catalogued: %v", names)
		}
	}
	audit := filepath.Join(state, "audit.jsonl")
	if !waitFor(10*time.Second, func() bool {
		b, _ := os.ReadFile(audit)
		return strings.Contains(string(b), `"tool_refused"`)
	}) {
		b, _ := os.ReadFile(audit)
		t.Fatalf("no tool_refused event in the audit log:\n%s", b)
	}
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The canary's other definitions carry the secret in their
		// descriptions, which the catalogue cache and the pins keep on the
		// operator's disk; the poisoned name must be nowhere, and the
		// audit log must hold no secret at all.
		if name := "get_" + secret; strings.Contains(string(b), name) {
			t.Errorf("%s holds the poisoned name: %s", p, excerpt(string(b), name))
		}
		if filepath.Base(p) == "audit.jsonl" && strings.Contains(string(b), secret) {
			t.Errorf("the audit log holds the secret: %s", excerpt(string(b), secret))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(g.Logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", excerpt(g.Logs.String(), secret))
	}
}

// connectBase finds the /mcp URL the gateway printed.
func connectBase(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	m := listenRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no listen URL in the log:\n%s", logs)
	}
	return m[1]
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func fmtJSON(v any) string { return string(mustJSON(v)) }

func excerpt(text, s string) string {
	i := strings.Index(text, s)
	if i < 0 {
		return ""
	}
	return "..." + text[max(0, i-200):min(len(text), i+len(s)+80)] + "..."
}
