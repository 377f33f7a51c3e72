package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// canaryClient is an SDK client that answers sampling and elicitation and
// records every JSON-RPC message it exchanges, so a test can check that a
// secret reached it through no relay at all.
type canaryClient struct {
	cs   *mcp.ClientSession
	wire *syncBuffer
	// what the relays delivered, to prove each one was exercised
	sampled, elicited, progress, logs, updated atomic.Int32
}

func (c *canaryClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.elicited.Add(1)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { c.progress.Add(1) },
		LoggingMessageHandler:       func(context.Context, *mcp.LoggingMessageRequest) { c.logs.Add(1) },
		ResourceUpdatedHandler:      func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { c.updated.Add(1) },
	}
}

// connectCanaryStdio starts toolgate over stdio with a recording client.
func connectCanaryStdio(t *testing.T, cfg string) (*canaryClient, *syncBuffer) {
	t.Helper()
	c := &canaryClient{wire: &syncBuffer{}}
	logs := &syncBuffer{}
	cmd := exec.Command(binPath, "serve", "--config", cfg, "--state-dir", t.TempDir(), "--log-level", "debug")
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, c.options())
	cs, err := client.Connect(ctxT(t), &mcp.LoggingTransport{Transport: &mcp.CommandTransport{Command: cmd}, Writer: c.wire}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect over stdio: %v\nlogs:\n%s", err, logs)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	waitReady(t, logs)
	return c, logs
}

// connectCanaryHTTP starts toolgate on HTTP with a recording client on a
// stateful session (server-to-client requests need one).
func connectCanaryHTTP(t *testing.T, cfg string) (*canaryClient, *syncBuffer) {
	t.Helper()
	g := startHTTP(t, cfg, "--log-level", "debug")
	c := &canaryClient{wire: &syncBuffer{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, c.options())
	// Every response body (JSON and SSE streams alike) is copied to the
	// record as it is read. (mcp.LoggingTransport would hide the
	// streamable connection's standalone stream from the SDK.)
	hc := &http.Client{Transport: teeTransport{w: c.wire}}
	tr := &mcp.StreamableClientTransport{Endpoint: g.URL, MaxRetries: -1, HTTPClient: hc}
	cs, err := client.Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v", g.URL, err)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c, g.Logs
}

// teeTransport copies every HTTP response body to w as it is read.
type teeTransport struct{ w io.Writer }

func (t teeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, t.w), res.Body}
	for k, vs := range res.Header {
		fmt.Fprintf(t.w, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	return res, nil
}

// newSecret is a unique secret for one test.
func newSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// canaryConfig writes a config in mode serving the canary server, which
// gets secret from the .env beside the config through its env block (the
// variable's name says nothing about being a secret).
func canaryConfig(t *testing.T, mode, secret string) string {
	t.Helper()
	bin := helperBinary(t, "canary", "./test/servers/canary")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("CANARY_VALUE="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"mode":   mode,
		"search": map[string]any{"mode": "lexical"},
		"mcpServers": map[string]any{
			"canary": map[string]any{"command": bin, "env": map[string]any{"CANARY_SECRET": "$CANARY_VALUE"}},
		},
	}
	if mode == "hybrid" {
		cfg["pinned_tools"] = []string{"canary__leak", "canary__fail_tool", "canary__fail_rpc"}
	}
	p := filepath.Join(dir, "config.json")
	writeJSON(t, p, cfg)
	return p
}

// TestRedactCanaryEveryRelay drives every relay of passthrough and hybrid
// mode, over stdio and HTTP, against a server that plants a .env secret in
// every field it can, and checks that no message the client received holds
// the secret, while each relay did deliver its message (masked).
func TestRedactCanaryEveryRelay(t *testing.T) {
	type run struct{ mode, front, secret string }
	var runs []run
	for _, mode := range []string{"passthrough", "hybrid"} {
		for _, front := range []string{"stdio", "http"} {
			runs = append(runs, run{mode, front, newSecret(t, "cnry")})
		}
	}
	// A five-character .env value (ignored before issue 14) is masked in
	// every relay too, object keys included.
	n, _ := rand.Int(rand.Reader, big.NewInt(1000))
	runs = append(runs, run{"passthrough", "stdio", fmt.Sprintf("x%03dq", n)})
	for _, r := range runs {
		mode, front, secret := r.mode, r.front, r.secret
		t.Run(mode+"/"+front+"/"+fmt.Sprint(len(secret)), func(t *testing.T) {
			cfg := canaryConfig(t, mode, secret)
			var c *canaryClient
			var logs *syncBuffer
			if front == "stdio" {
				c, logs = connectCanaryStdio(t, cfg)
			} else {
				c, logs = connectCanaryHTTP(t, cfg)
			}
			exerciseCanary(t, c, mode == "passthrough")
			// The relays ran (the test cannot pass by relaying nothing).
			if c.sampled.Load() == 0 || c.elicited.Load() == 0 || c.progress.Load() == 0 {
				t.Errorf("relays not exercised: sampled=%d elicited=%d progress=%d", c.sampled.Load(), c.elicited.Load(), c.progress.Load())
			}
			if mode == "passthrough" && c.logs.Load() == 0 {
				t.Error("no log notification was relayed")
			}
			if mode == "passthrough" && !waitFor(10*time.Second, func() bool { return c.updated.Load() > 0 }) {
				t.Error("no resource update was relayed")
			}
			// Then nothing the client received holds the secret.
			for what, text := range map[string]string{"the client": c.wire.String(), "the gateway's log": logs.String()} {
				if i := strings.Index(text, secret); i >= 0 {
					lo, hi := max(0, i-300), min(len(text), i+len(secret)+100)
					t.Errorf("%s received the secret: ...%s...", what, text[lo:hi])
				}
			}
			if n := strings.Count(c.wire.String(), "[REDACTED]"); n < 20 {
				t.Errorf("only %d masks on the wire; the canary's fields did not all arrive", n)
			}
		})
	}
}

func exerciseCanary(t *testing.T, c *canaryClient, full bool) {
	t.Helper()
	ctx := ctxT(t)
	cs := c.cs
	if full {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
	}
	if full {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "canary://resource"}); err != nil {
			t.Fatalf("resources/subscribe: %v", err)
		}
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = true
	}
	if !names["canary__leak"] || !names["canary__fail_rpc"] {
		t.Fatalf("tools/list = %v, want the canary's tools", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "canary__leak", Arguments: map[string]any{"sample": true, "elicit": true}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil || res.IsError {
		t.Fatalf("canary__leak: %v %v", err, res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "canary__fail_tool", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("canary__fail_tool: %v %v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "canary__fail_rpc", Arguments: map[string]any{}}); err == nil {
		t.Fatal("canary__fail_rpc: no error")
	} else if !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("canary__fail_rpc error not masked: %v", err)
	}
	if !full {
		// Hybrid: the meta-tools reach the same server.
		if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "leak description", "top_k": 5}}); err != nil || r.IsError {
			t.Fatalf("search_tools: %v %v", err, r)
		}
		if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "canary__leak", "arguments": map[string]any{}}}); err != nil || r.IsError {
			t.Fatalf("call_tool canary__leak: %v %v", err, r)
		}
		return
	}
	lp, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(lp.Prompts) == 0 {
		t.Fatalf("prompts/list: %v %v", err, lp)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "canary__leak_prompt", Arguments: map[string]string{"arg": "a"}}); err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	if lr, err := cs.ListResources(ctx, nil); err != nil || len(lr.Resources) == 0 {
		t.Fatalf("resources/list: %v %v", err, lr)
	}
	if lr, err := cs.ListResourceTemplates(ctx, nil); err != nil || len(lr.ResourceTemplates) == 0 {
		t.Fatalf("resources/templates/list: %v %v", err, lr)
	}
	for _, uri := range []string{"canary://resource", "canary://items/7"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "canary__leak_prompt"}, Argument: mcp.CompleteParamsArgument{Name: "arg", Value: "x"}})
	if err != nil || len(comp.Completion.Values) == 0 {
		t.Fatalf("completion/complete: %v %v", err, comp)
	}
}

// TestRedactCanaryStateless: the stateless HTTP scope (a client on the
// 2026-07-28 revision, no session) has its own server; it is sealed too.
// The call also checks that the client's per-request protocol _meta is not
// relayed to an upstream on an older revision (which refused the call).
func TestRedactCanaryStateless(t *testing.T) {
	secret := newSecret(t, "cnry")
	g := startHTTP(t, canaryConfig(t, "passthrough", secret))
	wire := &syncBuffer{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: teeTransport{w: wire}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	ctx := ctxT(t)
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) == 0 {
		t.Fatalf("tools/list: %v %v", err, lt)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "canary__fail_tool", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("canary__fail_tool: %v %v", err, res)
	}
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	if strings.Contains(wire.String(), secret) {
		t.Fatalf("the stateless client received the secret: %s", excerpt(wire.String(), secret))
	}
	if !strings.Contains(wire.String(), "[REDACTED]") {
		t.Fatalf("nothing masked arrived:\n%s", wire)
	}
}
