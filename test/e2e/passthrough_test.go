package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// writePassthroughConfig writes a passthrough-mode config; extra holds
// further top-level keys.
func writePassthroughConfig(t *testing.T, servers map[string]any, filters map[string]any, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{"mode": "passthrough", "mcpServers": servers, "search": map[string]any{"mode": "lexical"}}
	filters = withEgressDefault(filters)
	if filters != nil {
		cfg["filters"] = filters
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// connectPassthrough connects a client that answers sampling and
// elicitation requests, counting them.
func connectPassthrough(t *testing.T, url string, sampled, elicited *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the e2e client"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	// A stateful session: the stateless 2026-07-28 revision has no
	// server-to-client requests during a call (SEP-2322 replaces them).
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listedTools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(ctxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	return names
}

// Sampling and elicitation requests an upstream makes during a tools/call
// reach the client session that made the call, and its answers go back.
func TestPassthroughSamplingAndElicitation(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, writePassthroughConfig(t, map[string]any{"everything": stdioServer("everything")}, nil, nil))
	var sampled, elicited atomic.Int32
	cs := connectPassthrough(t, g.URL, &sampled, &elicited)

	names := listedTools(t, cs)
	for _, want := range []string{"everything__echo", "everything__trigger-sampling-request", "everything__trigger-elicitation-request"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list lacks %s: %v", want, names)
		}
	}
	res := call(t, cs, "everything__trigger-sampling-request", map[string]any{"prompt": "say hi"})
	if res.IsError || !strings.Contains(text(res), "sampled by the e2e client") || sampled.Load() != 1 {
		t.Fatalf("sampling round trip: sampled %d, result %q", sampled.Load(), text(res))
	}
	res = call(t, cs, "everything__trigger-elicitation-request", map[string]any{})
	if elicited.Load() != 1 || !strings.Contains(strings.ToLower(text(res)), "decline") {
		t.Fatalf("elicitation round trip: elicited %d, result %q", elicited.Load(), text(res))
	}
}

// A call filter's denial is a JSON-RPC error with the denial's code; a
// tool the access filter hides is neither listed nor callable.
func TestPassthroughDeniedCallErrorCode(t *testing.T) {
	t.Parallel()
	policy := "package toolgate.e2e\n\ndefault allow := false\n\nallow if input.tool != \"get-sum\"\n\ndeny_reason := \"sums are not allowed\"\n"
	cfg := writePassthroughConfig(t, map[string]any{"everything": stdioServer("everything")},
		map[string]any{"rego_policy": "deny.rego", "access_control": map[string]any{"deny": []string{"everything__get-env"}}},
		map[string]string{"deny.rego": policy})
	g := startHTTP(t, cfg)
	var n atomic.Int32
	cs := connectPassthrough(t, g.URL, &n, &n)

	names := listedTools(t, cs)
	if slices.Contains(names, "everything__get-env") || !slices.Contains(names, "everything__get-sum") {
		t.Fatalf("tools/list: want get-sum listed and get-env hidden, got %v", names)
	}
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != -32001 {
		t.Fatalf("denied call: want JSON-RPC error -32001, got %v", err)
	}
	_, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "everything__get-env", Arguments: map[string]any{}})
	if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("hidden tool: want JSON-RPC error -32602 (unknown tool), got %v", err)
	}
	if res := call(t, cs, "everything__echo", map[string]any{"message": "hi"}); res.IsError || !strings.Contains(text(res), "hi") {
		t.Fatalf("allowed call: %q", text(res))
	}
}

// Two upstreams serve the same resource URIs: both are listed, the second
// one's under toolgate://SERVER/, and reading that reaches the second.
func TestPassthroughResourceFromSecondUpstream(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, writePassthroughConfig(t, map[string]any{
		"everything": stdioServer("everything"), "second": stdioServer("everything"),
	}, nil, nil))
	var n atomic.Int32
	cs := connectPassthrough(t, g.URL, &n, &n)
	var uris []string
	for r, err := range cs.Resources(ctxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	var second string
	for _, u := range uris {
		if strings.HasPrefix(u, "toolgate://second/demo://") {
			second = u
			break
		}
	}
	if second == "" {
		t.Fatalf("no resource of the second upstream under toolgate://second/: %v", uris)
	}
	if !slices.Contains(uris, strings.Replace(second, "toolgate://second/", "toolgate://everything/", 1)) {
		t.Fatalf("the first upstream's copy of %s is not listed: %v", second, uris)
	}
	res, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: second})
	if err != nil {
		t.Fatalf("read %s: %v", second, err)
	}
	if len(res.Contents) == 0 || res.Contents[0].URI != second || res.Contents[0].Text == "" && len(res.Contents[0].Blob) == 0 {
		t.Fatalf("read %s: %+v", second, res.Contents)
	}
	// Prompts are namespaced like tools.
	pr, err := cs.ListPrompts(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, p := range pr.Prompts {
		prompts = append(prompts, p.Name)
	}
	if !slices.ContainsFunc(prompts, func(s string) bool { return strings.HasPrefix(s, "second__") }) {
		t.Fatalf("prompts not namespaced per server: %v", prompts)
	}
}

// TestPassthroughAllowServersHidesResourcesAndPrompts: a server outside
// access_control.allow_servers is hidden in passthrough for resources and
// prompts too, not only for tools.
func TestPassthroughAllowServersHidesResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, writePassthroughConfig(t, map[string]any{
		"ok": stdioServer("everything"), "secret": stdioServer("everything"),
	}, map[string]any{"access_control": map[string]any{"allow_servers": []string{"ok"}}}, nil))
	var n atomic.Int32
	cs := connectPassthrough(t, g.URL, &n, &n)
	var uris []string
	for r, err := range cs.Resources(ctxT(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	if len(uris) == 0 {
		t.Fatal("the admitted server's resources are missing")
	}
	for _, u := range uris {
		if strings.Contains(u, "secret") {
			t.Fatalf("a resource of the refused server is listed: %s", u)
		}
	}
	if _, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: "toolgate://secret/" + uris[0]}); err == nil {
		t.Fatal("a resource of the refused server was read")
	}
	pr, err := cs.ListPrompts(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pr.Prompts {
		if strings.HasPrefix(p.Name, "secret__") {
			t.Fatalf("a prompt of the refused server is listed: %s", p.Name)
		}
	}
	if len(pr.Prompts) > 0 {
		name := strings.Replace(pr.Prompts[0].Name, "ok__", "secret__", 1)
		if _, err := cs.GetPrompt(ctxT(t), &mcp.GetPromptParams{Name: name}); err == nil {
			t.Fatalf("prompt %s of the refused server was served", name)
		}
	}
	for _, tl := range listedTools(t, cs) {
		if strings.HasPrefix(tl, "secret__") {
			t.Fatalf("a tool of the refused server is listed: %s", tl)
		}
	}
}
