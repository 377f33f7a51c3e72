package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/upstream"
)

// refuser is call middleware that refuses, fails, panics or refuses the
// result as its "mode" argument says.
type refuser struct{}

func (refuser) ID() string { return "dev.test/refuser" }
func (refuser) WrapCall(next extension.CallHandler) extension.CallHandler {
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		switch req.Args()["mode"] {
		case "deny":
			return nil, extension.Deny("refuser.deny", "denied by the test")
		case "fail":
			return nil, errors.New("the policy store is down")
		case "panic":
			panic("refuser panicked")
		case "nil":
			return nil, nil
		}
		res, err := next(ctx, req)
		if err == nil && req.Args()["mode"] == "response" {
			return nil, extension.Deny("refuser.response", "result refused by the test")
		}
		return res, err
	}
}

type auditLine struct {
	Type   string         `json:"type"`
	Action string         `json:"action"`
	Reason string         `json:"reason"`
	Fields map[string]any `json:"fields"`
}

func readAudit(t *testing.T, path string) []auditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %s: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestEveryRefusalRecordedOnce: whichever stage refuses a call — the name
// check, the discovery gate, a middleware's denial, failure, panic or
// missing result, or a refusal of the result — the audit log gets exactly
// one block decision for it, and an allowed call none.
func TestEveryRefusalRecordedOnce(t *testing.T) {
	url := echoUpstream(t)
	g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}}, refuser{})
	ctx := context.Background()
	callTool := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": tool, "arguments": args}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(kind string, wantBlocks int, wantReason string, call func() *mcp.CallToolResult) {
		t.Helper()
		before := len(readAudit(t, g.AuditPath()))
		res := call()
		if res.IsError != (wantBlocks > 0) {
			t.Errorf("%s: isError = %v", kind, res.IsError)
		}
		var blocks []auditLine
		for _, l := range readAudit(t, g.AuditPath())[before:] {
			if l.Type == "tool_call_intercepted" && l.Action == "block" {
				blocks = append(blocks, l)
			}
		}
		if len(blocks) != wantBlocks {
			t.Fatalf("%s: %d block records, want %d: %+v", kind, len(blocks), wantBlocks, blocks)
		}
		if wantBlocks == 1 && blocks[0].Reason != wantReason {
			t.Errorf("%s: recorded reason %q, want %q", kind, blocks[0].Reason, wantReason)
		}
	}
	check("malformed name", 1, "malformed_name", func() *mcp.CallToolResult { return callTool("noseparator", nil) })
	check("discovery gate", 1, "discovery_gate", func() *mcp.CallToolResult { return callTool("up__echo", map[string]any{"message": "x"}) })
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, reason string }{
		{"deny", "refuser.deny"},
		{"fail", "dev.test/refuser"},
		{"panic", "dev.test/refuser"},
		{"nil", "dev.test/refuser"},
		{"response", "refuser.response"},
	} {
		check(tc.mode, 1, tc.reason, func() *mcp.CallToolResult {
			return callTool("up__echo", map[string]any{"message": "x", "mode": tc.mode})
		})
	}
	check("allowed", 0, "", func() *mcp.CallToolResult { return callTool("up__echo", map[string]any{"message": "x"}) })
}

// probe is an extension that serves a request method and advertises
// settings (SEP-2133).
type probe struct{}

type probeParams struct {
	mcp.ParamsBase
	Word string `json:"word"`
}

type probeResult struct {
	mcp.ResultBase
	Echo string `json:"echo"`
}

func (probe) ID() string { return "com.example/probe" }
func (probe) Capabilities() map[string]any {
	return map[string]any{"words": float64(1)}
}
func (probe) Methods() []extension.Method {
	return []extension.Method{
		extension.NewMethod("com.example/echo", nil, func(_ context.Context, p *probeParams) (*probeResult, error) {
			if p.Word == "" {
				return nil, extension.Deny("probe", "no word")
			}
			return &probeResult{Echo: p.Word}, nil
		}),
		extension.NewMethod("com.example/future", []string{"2099-01-01"}, func(context.Context, *probeParams) (*probeResult, error) {
			return &probeResult{Echo: "from the future"}, nil
		}),
	}
}

// TestExtensionMethodsAndCapabilities: an extension's settings appear at
// capabilities.extensions[id], its method answers, a denial is the
// denial's JSON-RPC error, and a method gated to other protocol versions
// is "method not found".
func TestExtensionMethodsAndCapabilities(t *testing.T) {
	ctx := context.Background()
	cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), Extensions: []extension.Extension{probe{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	for _, m := range []string{"com.example/echo", "com.example/future"} {
		if err := mcp.AddSendingCustomMethod[*probeParams, *probeResult](c, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	caps := cs.InitializeResult().Capabilities
	if got, _ := json.Marshal(caps.Extensions["com.example/probe"]); string(got) != `{"words":1}` {
		t.Errorf("capabilities.extensions[com.example/probe] = %s", got)
	}
	if caps.Tools == nil {
		t.Error("advertising extensions dropped the tools capability")
	}
	res, err := mcp.CallCustomMethod[*probeParams, *probeResult](ctx, cs, "com.example/echo", &probeParams{Word: "hi"})
	if err != nil || res.Echo != "hi" {
		t.Fatalf("com.example/echo = %+v, %v", res, err)
	}
	var rpc *jsonrpc.Error
	if _, err := mcp.CallCustomMethod[*probeParams, *probeResult](ctx, cs, "com.example/echo", &probeParams{}); !errors.As(err, &rpc) || rpc.Code != extension.RPCCodePermissionDenied {
		t.Errorf("denied method call: %v, want code %d", err, extension.RPCCodePermissionDenied)
	}
	if _, err := mcp.CallCustomMethod[*probeParams, *probeResult](ctx, cs, "com.example/future", &probeParams{}); !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("version-gated method: %v, want method not found", err)
	}
}

// TestPassthroughRefusalRecordedOnce is TestEveryRefusalRecordedOnce for
// tools/call in passthrough mode, which shares the call path: each refusal
// is answered with its JSON-RPC error and recorded once.
func TestPassthroughRefusalRecordedOnce(t *testing.T) {
	url := echoUpstream(t)
	ctx := context.Background()
	cfg := &config.Config{Exposure: config.Exposure{Mode: config.ModePassthrough}, Servers: map[string]*config.Server{"up": {Name: "up", URL: url + "/", Transport: config.TransportStreamableHTTP}},
		Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), Extensions: []extension.Extension{refuser{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		tool, mode, reason string
		code               int64
	}{
		{"up__nope", "", "not_listed", jsonrpc.CodeInvalidParams},
		{"up__echo", "deny", "refuser.deny", extension.RPCCodePermissionDenied},
		{"up__echo", "fail", "dev.test/refuser", extension.RPCCodePermissionDenied},
		{"up__echo", "response", "refuser.response", extension.RPCCodePermissionDenied},
		{"up__echo", "", "", 0},
	} {
		before := len(readAudit(t, g.AuditPath()))
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"message": "x", "mode": tc.mode}})
		var rpc *jsonrpc.Error
		if tc.code != 0 && (!errors.As(err, &rpc) || rpc.Code != tc.code) {
			t.Errorf("%s %s: %v, want JSON-RPC error %d", tc.tool, tc.mode, err, tc.code)
		}
		if tc.code == 0 && err != nil {
			t.Errorf("allowed call: %v", err)
		}
		var blocks []auditLine
		for _, l := range readAudit(t, g.AuditPath())[before:] {
			if l.Type == "tool_call_intercepted" && l.Action == "block" {
				blocks = append(blocks, l)
			}
		}
		want := 1
		if tc.reason == "" {
			want = 0
		}
		if len(blocks) != want || (want == 1 && blocks[0].Reason != tc.reason) {
			t.Errorf("%s %s: block records %+v, want one with reason %q", tc.tool, tc.mode, blocks, tc.reason)
		}
	}
}

// TestRunToolCallForwardsBytes: the hook a raw JSON-RPC relay uses. With
// no middleware reading them, the arguments reach the upstream as the
// bytes received, and the upstream's result comes back as its bytes; the
// gate and the audit still apply.
func TestRunToolCallForwardsBytes(t *testing.T) {
	url := echoUpstream(t)
	g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
	ctx := context.Background()
	raw := json.RawMessage(`{ "message" :"hi",  "n": 1.50 }`)
	result := json.RawMessage(`{"content":[{"type":"text","text":"from the relay"}]}`)
	var sent json.RawMessage
	send := func(_ context.Context, _ *upstream.Server, p *mcp.CallToolParams) (*extension.CallResult, error) {
		sent = p.Arguments.(json.RawMessage)
		return extension.RawCallResult(result), nil
	}
	// The gate applies: nothing was searched in this session yet.
	var ss *mcp.ServerSession
	for s := range g.servers[scopeConnection].Sessions() {
		ss = s
	}
	if _, r := g.RunToolCall(ctx, ToolCall{Name: "up__echo", Arguments: raw, Session: ss, Send: send}); r == nil || sent != nil {
		t.Fatalf("an unsearched tool was called (refusal %v)", r)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
		t.Fatal(err)
	}
	out, r := g.RunToolCall(ctx, ToolCall{Name: "up__echo", Arguments: raw, Session: ss, Send: send})
	if r != nil {
		t.Fatalf("refused: %+v", r.ToolResult("up__echo"))
	}
	if string(sent) != string(raw) {
		t.Errorf("forwarded %s, want the bytes received %s", sent, raw)
	}
	if b, _ := out.JSON(); string(b) != string(result) {
		t.Errorf("result %s, want the upstream's bytes %s", b, result)
	}
	var calls int
	for _, l := range readAudit(t, g.AuditPath()) {
		if l.Type == "tool_called" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("%d tool_called records, want 1", calls)
	}
}

// shadower tries to serve a method MCP defines.
type shadower struct{}

func (shadower) ID() string { return "com.example/shadower" }
func (shadower) Methods() []extension.Method {
	return []extension.Method{extension.NewMethod("tools/call", nil, func(context.Context, *probeParams) (*probeResult, error) { return &probeResult{}, nil })}
}

// An extension that would shadow an MCP method stops the gateway at start.
func TestSpecMethodRefused(t *testing.T) {
	cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Extensions: []extension.Extension{shadower{}}})
	if err == nil {
		g.Close()
		t.Fatal("a gateway started with an extension serving tools/call")
	}
	if !strings.Contains(err.Error(), "com.example/shadower") || !strings.Contains(err.Error(), "defined by MCP") {
		t.Errorf("error %q does not name the extension and the problem", err)
	}
}
