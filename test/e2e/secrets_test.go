package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func canary(t *testing.T, kind string) string {
	var b [8]byte
	rand.Read(b[:])
	return "tgcanary-" + kind + "-" + hex.EncodeToString(b[:])
}

// bearerServer is a streamable-HTTP MCP server (in this test process) that
// answers only requests carrying "Authorization: Bearer <want>".
type bearerServer struct {
	mu   sync.Mutex
	want string
	url  string
}

func newBearerServer(t *testing.T, want string) *bearerServer {
	b := &bearerServer{want: want}
	s := mcp.NewServer(&mcp.Implementation{Name: "secured", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "list_invoices", Description: "List the invoices of the billing account"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "invoice 1: 42 EUR"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+b.want
		b.mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL + "/mcp"
	return b
}

func (b *bearerServer) expire() { b.mu.Lock(); b.want = "something-else"; b.mu.Unlock() }

// TestCanarySecretsNeverLeak plants unique secrets in the tokens file, the
// .env beside the config and the gateway's environment, runs a realistic
// session through the real binary, and checks that no byte the client
// received, no log line (at debug level) and no error message holds any of
// them.
func TestCanarySecretsNeverLeak(t *testing.T) {
	tokCanary, dotCanary, procCanary := canary(t, "tok"), canary(t, "dotenv"), canary(t, "proc")
	api := newBearerServer(t, tokCanary)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tokens"), []byte("# billing API\nbilling=\""+tokCanary+"\"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("BILLING_DB_PASSWORD="+dotCanary+"\n"), 0o600)
	cfg := filepath.Join(dir, "config.json")
	everything := stdioServer("everything")
	everything["env"] = map[string]any{"DB_PASSWORD_FOR_CHILD": "$BILLING_DB_PASSWORD"}
	writeJSON(t, cfg, map[string]any{
		"mcpServers": map[string]any{
			"everything": everything,
			"billing":    map[string]any{"url": api.url},
		},
		"filters": map[string]any{"similarity_threshold": 0.2, "load_control": map[string]any{"deny_private_networks": false}},
	})

	var wire bytes.Buffer // every JSON-RPC message in both directions
	logs := &syncBuffer{}
	state := t.TempDir()
	cmd := exec.Command(binPath, "serve", "--config", cfg, "--state-dir", state, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "TG_CANARY_API_TOKEN="+procCanary, "TG_PLAIN_CANARY="+procCanary)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.LoggingTransport{Transport: &mcp.CommandTransport{Command: cmd}, Writer: &lockedWriter{w: &wire}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	defer cs.Close()
	waitReady(t, logs)

	// A denied call (not searched yet).
	if r := call(t, cs, "call_tool", map[string]any{"tool_name": "billing__list_invoices"}); !r.IsError {
		t.Fatal("gate let an unsearched call through")
	}
	// Search and successful calls; the billing call proves the token was sent.
	search(t, cs, "list the invoices of the billing account", 5)
	if r := call(t, cs, "call_tool", map[string]any{"tool_name": "billing__list_invoices"}); r.IsError || !strings.Contains(text(r), "42 EUR") {
		t.Fatalf("billing call: %s", text(r))
	}
	search(t, cs, "environment variables of the server", 5)
	r := call(t, cs, "call_tool", map[string]any{"tool_name": "everything__get-env"})
	if r.IsError {
		t.Fatalf("get-env: %s", text(r))
	}
	env := text(r)
	// The child got the value its env block asked for (masked on the way
	// back), and none of the gateway's own environment beyond the standard
	// variables.
	if !strings.Contains(env, "DB_PASSWORD_FOR_CHILD") || !strings.Contains(env, "[REDACTED]") {
		t.Fatalf("get-env should show the child's configured variable, masked: %s", env)
	}
	if strings.Contains(env, "TG_CANARY_API_TOKEN") || strings.Contains(env, "TG_PLAIN_CANARY") {
		t.Fatalf("the gateway's environment leaked into the child: %s", env)
	}
	// The token expires: the 401 becomes an actionable message.
	api.expire()
	r = call(t, cs, "call_tool", map[string]any{"tool_name": "billing__list_invoices"})
	if !r.IsError || !strings.Contains(text(r), "tokens file") {
		t.Fatalf("401: %s", text(r))
	}
	// A run-time load of the same URL under another name gets no token.
	r = call(t, cs, "load_mcp_server", map[string]any{"server_name": "billing-copy", "url": api.url})
	if !r.IsError {
		t.Fatalf("load without token succeeded: %s", text(r))
	}
	cs.Close()

	for _, c := range []string{tokCanary, dotCanary, procCanary} {
		if strings.Contains(wire.String(), c) {
			t.Errorf("canary %s reached the client", c[:16])
		}
		if strings.Contains(logs.String(), c) {
			t.Errorf("canary %s reached the log", c[:16])
		}
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatal("the log was not at debug level; the check proves nothing")
	}
	// Nothing the gateway persisted (audit log and its events, pins,
	// catalogue cache, embedding cache, gate key) holds a canary either.
	persisted := 0
	filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		persisted++
		for _, c := range []string{tokCanary, dotCanary, procCanary} {
			if strings.Contains(string(data), c) {
				t.Errorf("canary %s persisted in %s", c[:16], p)
			}
		}
		return nil
	})
	audit, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil || !strings.Contains(string(audit), "tool_call_intercepted") || persisted < 2 {
		t.Fatalf("the audit log was not written (%v, %d files); the check proves nothing", err, persisted)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestTokensFileVariableMustExist(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	writeJSON(t, cfg, map[string]any{"mcpServers": map[string]any{}})
	os.WriteFile(filepath.Join(dir, ".env"), []byte("TOOLGATE_TOKENS_FILE=~/no/such/tokens\n"), 0o600)
	out, err := exec.Command(binPath, "tools", "--config", cfg, "--state-dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TOOLGATE_TOKENS_FILE") || !strings.Contains(string(out), "no/such/tokens") {
		t.Fatalf("want a refusal naming the variable and path, got %v:\n%s", err, out)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
