package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

// The test binary doubles as a stdio upstream, whose calls take the raw
// leg (see internal/upstream/raw.go).
const envStdioUpstream = "TOOLGATE_GATEWAY_TEST_STDIO_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(envStdioUpstream) == "1" {
		if err := stdioUpstream().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envRawUpstream) == "1" {
		rawUpstream()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// relaySecret is a token the upstream leaks in a result; the gateway's
// redactor knows it.
const relaySecret = `sk-relay"<&>\secret`

func stdioUpstream() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-up", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes its arguments", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("args: " + string(req.Params.Arguments)), nil
	})
	s.AddTool(&mcp.Tool{Name: "fails", Description: "Fails as a tool", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := text("it failed")
		res.IsError = true
		return res, nil
	})
	s.AddTool(&mcp.Tool{Name: "refuses", Description: "Answers with a JSON-RPC error", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32042, Message: "refused upstream", Data: json.RawMessage(`{"why":"test"}`)}
	})
	s.AddTool(&mcp.Tool{Name: "leaks", Description: "Leaks a secret", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := text("the token is " + relaySecret)
		res.StructuredContent = map[string]any{"token": relaySecret, "nested": []any{relaySecret}}
		return res, nil
	})
	s.AddTool(&mcp.Tool{Name: "waits", Description: "Waits until cancelled", InputSchema: obj}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "steps", Description: "Reports progress", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= progressSteps; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: progressSteps}); err != nil {
				return nil, err
			}
		}
		return text("done"), nil
	})
	return s
}

// legRun is what one gateway answered, recorded and counted for the same
// calls.
type legRun struct {
	answers []string
	audit   []string
	metrics []string
	// sdkServed counts the calls the SDK server handled (not the stdio
	// frontend's relay), rawSent those sent on the upstream's raw leg.
	sdkServed int64
	rawSent   uint64
	// undecoded counts the results answered as the upstream's bytes.
	undecoded uint64
	// httpPeeled counts the calls the HTTP frontend's relay answered.
	httpPeeled uint64
}

// runLeg drives a gateway (mode, and whether calls take the SDK client or
// the raw leg) through the same calls, from a client on its stdio
// frontend.
func runLeg(t *testing.T, mode string, sdk bool) legRun {
	return runFrontLeg(t, "stdio", "stdio", mode, sdk)
}

// runFrontLeg is runLeg from a client on front: "stdio" (over pipes) or
// "http" (streamable HTTP, a stateful session), to the upstream up:
// "stdio", or streamable HTTP answering on SSE streams ("http") or as JSON
// ("http-json"). With sdk set, calls take the SDK's path on both sides
// (the SDK server, the SDK client); without, the frontend's relay and the
// upstream's raw leg.
func runFrontLeg(t *testing.T, front, up, mode string, sdk bool) legRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := &config.Server{Name: "up", Command: exe, Transport: config.TransportStdio,
		Env: map[string]string{envStdioUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}
	if up != "stdio" {
		us := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return stdioUpstream() },
			&mcp.StreamableHTTPOptions{JSONResponse: up == "http-json"}))
		t.Cleanup(us.Close)
		srv = &config.Server{Name: "up", URL: us.URL, Transport: config.TransportStreamableHTTP}
	}
	cfg := &config.Config{
		Exposure: config.Exposure{Mode: mode},
		Servers:  map[string]*config.Server{"up": srv},
		Filters:  config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
	}
	ctx := context.Background()
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), SDKCalls: sdk, Redactor: secrets.NewRedactor(relaySecret), Extensions: []extension.Extension{refuser{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var sdkCalls atomic.Int64
	g.servers[scopeConnection].AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				sdkCalls.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	// The client speaks the revision real clients speak, so tools/call can
	// take the relay.
	var ct mcp.Transport
	switch front {
	case "stdio":
		cr, gw := io.Pipe()
		gr, cw := io.Pipe()
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- g.serveIO(sctx, gr, gw) }()
		t.Cleanup(func() { stop(); cw.Close(); <-served })
		ct = &mcp.IOTransport{Reader: cr, Writer: cw}
	case "http":
		hs := httptest.NewServer(g.HTTPHandler())
		t.Cleanup(hs.Close)
		ct = &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"}
	}
	var mu sync.Mutex
	var progress []string
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, fmt.Sprint(req.Params.ProgressToken, req.Params.Progress))
			mu.Unlock()
		},
	}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if front == "http" && mode == config.ModePassthrough {
		// In passthrough mode the relay takes a session's calls once its
		// client has the GET stream open, which the SDK client opens
		// after initialize (see ptMode.relaysDuringCall).
		waitStreaming(t, g, cs.ID())
	}

	var run legRun
	answer := func(res *mcp.CallToolResult, err error) {
		if err != nil {
			run.answers = append(run.answers, "error: "+err.Error())
			return
		}
		b, _ := json.Marshal(res)
		run.answers = append(run.answers, string(b))
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"echo", map[string]any{"message": "hi", "n": 1.5, "nested": map[string]any{"b": []any{true, nil}, "a": "x<y>&z"}}},
		{"echo", nil},
		{"fails", map[string]any{}},
		{"refuses", map[string]any{}},
		{"leaks", map[string]any{}},
		{"steps", map[string]any{}},
		{"hidden_nonexistent", map[string]any{}},
		{"echo", map[string]any{"mode": "deny"}}, // refused by a filter
		{"echo", map[string]any{"mode": "fail"}}, // a filter failed
	}
	sdkBefore := sdkCalls.Load()
	if mode == config.ModeMeta {
		// Before search_tools, the discovery gate refuses the call.
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{}}}))
		before := sdkCalls.Load()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echoes fails refuses leaks progress", "top_k": 10}})
		if err != nil || res.IsError {
			t.Fatalf("search: %v %+v", err, res)
		}
		sdkBefore += sdkCalls.Load() - before // search_tools is the SDK server's on every path
	}
	for _, c := range calls {
		if mode == config.ModeMeta {
			answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__" + c.tool, "arguments": c.args}}))
			continue
		}
		p := &mcp.CallToolParams{Name: "up__" + c.tool, Arguments: c.args}
		if c.tool == "steps" {
			p.SetProgressToken("client-token")
		}
		answer(cs.CallTool(ctx, p))
		if c.tool == "steps" {
			// The SDK client hands each notification to a goroutine of
			// its own, so its handler may run after CallTool returns:
			// wait for it rather than for an arbitrary number of calls.
			awaitProgress(&mu, &progress, progressSteps)
		}
	}
	run.sdkServed, run.rawSent, run.undecoded, run.httpPeeled = sdkCalls.Load()-sdkBefore, g.rawCalls.Load(), g.undecoded.Load(), g.httpPeeled.Load()
	// Malformed calls: the relay must refuse them as the SDK path does.
	if mode == config.ModeMeta {
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": 5}}))
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": "not an object"}}))
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "extra": true}}))
	} else {
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: []any{1}}))
		answer(cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: "text"}))
	}
	mu.Lock()
	run.answers = append(run.answers, "progress: "+strings.Join(progress, ","))
	mu.Unlock()

	f, err := os.Open(g.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		// What differs from run to run by nature: time, the chain, the
		// random session key, how long a call took.
		delete(rec, "time")
		delete(rec, "prev")
		delete(rec, "hash")
		delete(rec, "session")
		if fields, ok := rec["fields"].(map[string]any); ok {
			delete(fields, "duration_ms")
		}
		b, _ := json.Marshal(rec)
		run.audit = append(run.audit, string(b))
	}

	rec := httptest.NewRecorder()
	g.metrics.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	timing := regexp.MustCompile(`_duration_seconds_(bucket|sum)`)
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "toolgate_") && !timing.MatchString(l) {
			run.metrics = append(run.metrics, l)
		}
	}
	return run
}

// Tool calls from a stdio client take the relay, and to a stdio server the
// raw leg; the SDK's path on both legs must give the same answers, audit
// records and metrics, in both modes.
func TestRawLegMatchesSDKLeg(t *testing.T) {
	for _, mode := range []string{config.ModeMeta, config.ModePassthrough} {
		t.Run(mode, func(t *testing.T) {
			sdk, raw := runLeg(t, mode, true), runLeg(t, mode, false)
			for _, c := range []struct {
				what      string
				sdk, raw  []string
				mustExist string
			}{
				{"answers", sdk.answers, raw.answers, "refused upstream"},
				{"audit records", sdk.audit, raw.audit, `"type":"tool_called"`},
				{"metrics", sdk.metrics, raw.metrics, "toolgate_tool_calls_total"},
			} {
				if !slices.Equal(c.sdk, c.raw) {
					t.Errorf("%s differ:\nsdk: %s\nraw: %s", c.what, strings.Join(c.sdk, "\n     "), strings.Join(c.raw, "\n     "))
				}
				if !strings.Contains(strings.Join(c.raw, "\n"), c.mustExist) {
					t.Errorf("%s: %q not exercised:\n%s", c.what, c.mustExist, strings.Join(c.raw, "\n"))
				}
			}
			// Each leg took its path: the relay served every call (none
			// reached the SDK server) and sent the six that reach the
			// upstream on the raw leg; the SDK's leg sent none there.
			want := 9
			if mode == config.ModeMeta {
				want++ // the call the gate refuses
			}
			if raw.sdkServed != 0 || raw.rawSent != 6 || sdk.rawSent != 0 || sdk.sdkServed != int64(want) {
				t.Errorf("paths taken: relay leg: %d calls on the SDK server, %d on the raw leg; SDK leg: %d on the SDK server, %d on the raw leg; want 0, 6, %d, 0",
					raw.sdkServed, raw.rawSent, sdk.sdkServed, sdk.rawSent, want)
			}
			// The five results (echo twice, fails, leaks, steps) were
			// answered from the upstream's bytes, undecoded, the secret
			// leaks sends masked on them.
			if raw.undecoded != 5 || sdk.undecoded != 0 {
				t.Errorf("results answered undecoded: relay leg %d, SDK leg %d; want 5, 0", raw.undecoded, sdk.undecoded)
			}
			all := strings.Join(raw.answers, "\n")
			if strings.Contains(all, "sk-relay") || !strings.Contains(all, "progress: client-token") && mode == config.ModePassthrough {
				t.Errorf("answers leak the secret or miss the progress:\n%s", all)
			}
		})
	}
}

// Tool calls from an HTTP client take the HTTP frontend's relay (but for
// one with a progress token, whose progress goes on the SDK's request
// stream), and to a stdio server the raw leg; the SDK's path on both must
// give the same answers, audit records and metrics, in both modes.
func TestHTTPRelayMatchesSDKPath(t *testing.T) {
	for _, mode := range []string{config.ModeMeta, config.ModePassthrough} {
		t.Run(mode, func(t *testing.T) {
			sdk, raw := runFrontLeg(t, "http", "stdio", mode, true), runFrontLeg(t, "http", "stdio", mode, false)
			for _, c := range []struct {
				what      string
				sdk, raw  []string
				mustExist string
			}{
				{"answers", sdk.answers, raw.answers, "refused upstream"},
				{"audit records", sdk.audit, raw.audit, `"type":"tool_called"`},
				{"metrics", sdk.metrics, raw.metrics, "toolgate_tool_calls_total"},
			} {
				if !slices.Equal(c.sdk, c.raw) {
					t.Errorf("%s differ:\nsdk: %s\nraw: %s", c.what, strings.Join(c.sdk, "\n     "), strings.Join(c.raw, "\n     "))
				}
				if !strings.Contains(strings.Join(c.raw, "\n"), c.mustExist) {
					t.Errorf("%s: %q not exercised:\n%s", c.what, c.mustExist, strings.Join(c.raw, "\n"))
				}
			}
			// Meta mode has one more call, the gate's refusal; in
			// passthrough the call with a progress token is the SDK's.
			calls, sdkServed := 9, int64(1)
			if mode == config.ModeMeta {
				calls, sdkServed = 10, 0
			}
			if raw.sdkServed != sdkServed || raw.httpPeeled != uint64(calls)-uint64(sdkServed) || raw.rawSent != 6 ||
				sdk.sdkServed != int64(calls) || sdk.httpPeeled != 0 || sdk.rawSent != 0 {
				t.Errorf("paths taken: relay: %d calls on the SDK server, %d on the relay, %d on the raw leg; SDK: %d, %d, %d; want %d, %d, 6; %d, 0, 0",
					raw.sdkServed, raw.httpPeeled, raw.rawSent, sdk.sdkServed, sdk.httpPeeled, sdk.rawSent,
					sdkServed, int64(calls)-sdkServed, calls)
			}
			all := strings.Join(raw.answers, "\n")
			if strings.Contains(all, "sk-relay") || !strings.Contains(all, "progress: client-token") && mode == config.ModePassthrough {
				t.Errorf("answers leak the secret or miss the progress:\n%s", all)
			}
		})
	}
}

// Tool calls to a streamable HTTP server take its raw leg in meta mode
// (the upstream's client handles none of a call's server-to-client
// traffic), whether it answers on an SSE stream or as JSON, and give the
// same answers, audit records and metrics as the SDK client's leg.
func TestHTTPRawLegMatchesSDKLeg(t *testing.T) {
	for _, up := range []string{"http", "http-json"} {
		t.Run(up, func(t *testing.T) {
			sdk, raw := runFrontLeg(t, "stdio", up, config.ModeMeta, true), runFrontLeg(t, "stdio", up, config.ModeMeta, false)
			for _, c := range []struct {
				what      string
				sdk, raw  []string
				mustExist string
			}{
				{"answers", sdk.answers, raw.answers, "refused upstream"},
				{"audit records", sdk.audit, raw.audit, `"type":"tool_called"`},
				{"metrics", sdk.metrics, raw.metrics, "toolgate_tool_calls_total"},
			} {
				if !slices.Equal(c.sdk, c.raw) {
					t.Errorf("%s differ:\nsdk: %s\nraw: %s", c.what, strings.Join(c.sdk, "\n     "), strings.Join(c.raw, "\n     "))
				}
				if !strings.Contains(strings.Join(c.raw, "\n"), c.mustExist) {
					t.Errorf("%s: %q not exercised:\n%s", c.what, c.mustExist, strings.Join(c.raw, "\n"))
				}
			}
			if raw.rawSent != 6 || sdk.rawSent != 0 {
				t.Errorf("calls on the raw leg: %d, on the SDK's path %d; want 6, 0", raw.rawSent, sdk.rawSent)
			}
		})
	}
	// In passthrough mode the upstream's client relays what a call's
	// stream carries (progress, logs, requests): the SDK client's leg.
	if raw := runFrontLeg(t, "stdio", "http", config.ModePassthrough, false); raw.rawSent != 0 {
		t.Errorf("passthrough: %d calls on the raw leg of an HTTP server; want 0", raw.rawSent)
	}
}

// waitStreaming waits until the HTTP session id has its GET stream open.
func waitStreaming(t *testing.T, g *Gateway, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l := g.httpSessions.Load()
		if s := l.lookup(id); s != nil && l.streaming(s) {
			return
		}
	}
	t.Fatalf("session %s never opened its GET stream", id)
}

// BenchmarkStdioCall is one tool call through the gateway (a client on
// its stdio frontend, over pipes; a stdio upstream), per mode, on the
// SDK's path or the relay's. The client's own allocations are counted
// too.
func BenchmarkStdioCall(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{config.ModeMeta, config.ModePassthrough} {
		for _, sdk := range []bool{true, false} {
			leg := map[bool]string{true: "sdk", false: "raw"}[sdk]
			b.Run(mode+"/"+leg, func(b *testing.B) {
				srv := &config.Server{Name: "up", Command: exe, Transport: config.TransportStdio,
					Env: map[string]string{envStdioUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}
				cfg := &config.Config{Exposure: config.Exposure{Mode: mode}, Servers: map[string]*config.Server{"up": srv},
					Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
				ctx := context.Background()
				g, err := New(ctx, Options{Config: cfg, StateDir: b.TempDir(), SDKCalls: sdk})
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				cr, gw := io.Pipe()
				gr, cw := io.Pipe()
				sctx, stop := context.WithCancel(ctx)
				defer stop()
				go g.serveIO(sctx, gr, gw)
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				p := &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "hi"}}
				if mode == config.ModeMeta {
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echoes"}}); err != nil {
						b.Fatal(err)
					}
					p = &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "hi"}}}
				}
				b.ReportAllocs()
				for b.Loop() {
					if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
						b.Fatal(err, res)
					}
				}
			})
		}
	}
}

// In hybrid mode call_tool judges its tool by the discovery gate even when
// the tool is pinned (tools/call of a pinned tool needs only the listing):
// the stdio frontend's relay must keep the two apart, as the SDK server's
// handlers do.
func TestRelayHybridCallToolKeepsTheGate(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sdk := range []bool{true, false} {
		t.Run(map[bool]string{true: "sdk", false: "relay"}[sdk], func(t *testing.T) {
			srv := &config.Server{Name: "up", Command: exe, Transport: config.TransportStdio,
				Env: map[string]string{envStdioUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}
			cfg := &config.Config{
				Exposure: config.Exposure{Mode: config.ModeHybrid, PinnedTools: []string{"up__echo"}},
				Servers:  map[string]*config.Server{"up": srv},
				Filters:  config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
			}
			ctx := context.Background()
			g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), SDKCalls: sdk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			cr, gw := io.Pipe()
			gr, cw := io.Pipe()
			sctx, stop := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() { served <- g.serveIO(sctx, gr, gw) }()
			t.Cleanup(func() { stop(); cw.Close(); <-served })
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
				Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			// call_tool before search_tools (and before any tools/list):
			// the gate has no record of the tool.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"m": 1}}})
			if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content[0].(*mcp.TextContent).Text), "has not been returned by search_tools") {
				t.Fatalf("call_tool of a pinned tool before search_tools: want the discovery gate's refusal, got %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"m": 1}})
			if err != nil || res.IsError {
				t.Fatalf("tools/call of the pinned tool: %v %+v", err, res)
			}
		})
	}
}

// A client's arguments are forwarded as received when nothing decoded
// them, but a stdio server reads a message per line: arguments that span
// lines (pretty-printed JSON, as an HTTP client may send) must still reach
// it as one message.
func TestRawLegSendsMultilineArgumentsOnOneLine(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := &config.Server{Name: "up", Command: exe, Transport: config.TransportStdio,
		Env: map[string]string{envStdioUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}
	cfg := &config.Config{
		Exposure: config.Exposure{Mode: config.ModePassthrough},
		Servers:  map[string]*config.Server{"up": srv},
		Filters:  config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out, r := g.RunToolCall(ctx, ToolCall{Name: "up__echo", Arguments: json.RawMessage("{\n  \"message\": \"hi\",\r\n\t\"n\": [1, 2]\n}")})
	if r != nil {
		t.Fatalf("refused: %+v", r.ToolResult("up__echo"))
	}
	res, err := out.Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `args: {"message":"hi","n":[1,2]}` {
		t.Errorf("the upstream got %s", got)
	}
	if g.rawCalls.Load() != 1 {
		t.Errorf("%d calls on the raw leg, want 1", g.rawCalls.Load())
	}
}

// BenchmarkHTTPCall is one tool call through the gateway's HTTP frontend
// (a stateful session) to a streamable HTTP upstream, per mode, on the
// SDK's path or the relay and raw leg. The client's and the upstream's
// allocations are counted too.
func BenchmarkHTTPCall(b *testing.B) {
	for _, mode := range []string{config.ModeMeta, config.ModePassthrough} {
		for _, sdk := range []bool{true, false} {
			leg := map[bool]string{true: "sdk", false: "raw"}[sdk]
			b.Run(mode+"/"+leg, func(b *testing.B) {
				up := stdioUpstream()
				us := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
				defer us.Close()
				srv := &config.Server{Name: "up", URL: us.URL, Transport: config.TransportStreamableHTTP}
				cfg := &config.Config{Exposure: config.Exposure{Mode: mode}, Servers: map[string]*config.Server{"up": srv},
					Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
				ctx := context.Background()
				g, err := New(ctx, Options{Config: cfg, StateDir: b.TempDir(), SDKCalls: sdk})
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				hs := httptest.NewServer(g.HTTPHandler())
				defer hs.Close()
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				p := &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"message": "hi"}}
				if mode == config.ModeMeta {
					if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echoes"}}); err != nil {
						b.Fatal(err)
					}
					p = &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "hi"}}}
				}
				b.ReportAllocs()
				for b.Loop() {
					if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
						b.Fatal(err, res)
					}
				}
			})
		}
	}
}

// awaitProgress waits up to five seconds for n progress notifications to
// have reached the client's handler. A notification that never arrives
// still fails the comparison that follows.
func awaitProgress(mu *sync.Mutex, progress *[]string, n int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got := len(*progress)
		mu.Unlock()
		if got >= n {
			return
		}
	}
}
