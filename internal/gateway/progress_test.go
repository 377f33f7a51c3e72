//lint:file-ignore SA1019 the test relays sampling, which passthrough still supports while clients and upstreams use it (SEP-2577 deprecates it with a long window).

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// progressSteps is how many progress notifications the "steps" tool sends
// just before its result.
const progressSteps = 3

// stepsUpstream serves "steps" (progress notifications, then the result at
// once), "logs" (log messages, then the result at once) and "ask" (a
// sampling request to the client, then the answer) over streamable HTTP.
func stepsUpstream(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "steps", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "steps", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= progressSteps; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: progressSteps}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "logs", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= progressSteps; i++ {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprint("step ", i)}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// passthroughGateway serves upstreamURL as "up" in passthrough mode, names
// not namespaced; each of edit changes the server's configuration first.
func passthroughGateway(t *testing.T, upstreamURL string, edit ...func(*config.Server)) *Gateway {
	t.Helper()
	no := false
	srv := &config.Server{Name: "up", URL: upstreamURL, Transport: config.TransportStreamableHTTP}
	for _, e := range edit {
		e(srv)
	}
	cfg := &config.Config{
		Exposure: config.Exposure{Mode: config.ModePassthrough, Namespace: &no},
		Servers:  map[string]*config.Server{"up": srv},
		Filters:  config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
	}
	g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

// memClient connects a client session to g over in-memory transports.
// gw and cl (nil: none) wrap the gateway's and the client's ends.
func memClient(t *testing.T, g *Gateway, gw, cl func(mcp.Transport) mcp.Transport, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	var c, s mcp.Transport = ct, st
	if gw != nil {
		s = gw(s)
	}
	if cl != nil {
		c = cl(c)
	}
	ctx := context.Background()
	if _, err := g.Connect(ctx, s); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// wireLog records the methods of the messages a client reads, in the order
// they arrive on the wire ("result" for a response), before its SDK hands
// notifications to a goroutine of their own.
type wireLog struct {
	mu  sync.Mutex
	got []string
}

func (w *wireLog) add(s string) {
	w.mu.Lock()
	w.got = append(w.got, s)
	w.mu.Unlock()
}

func (w *wireLog) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// wrap is t with every message its client reads recorded in w.
func (w *wireLog) wrap(t mcp.Transport) mcp.Transport { return loggedTransport{t, w} }

// slowWrites is t with slowProgress's delays.
func slowWrites(t mcp.Transport) mcp.Transport { return slowProgress{t} }

type loggedTransport struct {
	mcp.Transport
	log *wireLog
}

func (t loggedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return loggedConn{c, t.log}, err
}

type loggedConn struct {
	mcp.Connection
	log *wireLog
}

func (c loggedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	switch m := m.(type) {
	case *jsonrpc.Request:
		c.log.add(m.Method)
	case *jsonrpc.Response:
		c.log.add("result")
	}
	return m, err
}

// slowProgress delays the gateway's writes of progress notifications and
// log messages to its client, which widens the window in which a result could overtake
// them.
type slowProgress struct{ mcp.Transport }

func (t slowProgress) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return slowConn{c}, err
}

type slowConn struct{ mcp.Connection }

func (c slowConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Request); ok && (r.Method == "notifications/progress" || r.Method == "notifications/message") {
		time.Sleep(20 * time.Millisecond)
	}
	return c.Connection.Write(ctx, m)
}

func progressParams(tok string) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: "steps", Arguments: map[string]any{}}
	p.SetProgressToken(tok)
	return p
}

// wantProgressFirst checks that every progress notification came before
// the result, on the wire.
func wantProgressFirst(t *testing.T, got []string) {
	t.Helper()
	wantFirst(t, got, "notifications/progress")
}

// wantFirst checks that progressSteps notifications of method came before
// the result, on the wire.
func wantFirst(t *testing.T, got []string, method string) {
	t.Helper()
	var seen []string
	for _, m := range got {
		if m == method || m == "result" {
			seen = append(seen, m)
		}
	}
	want := make([]string, 0, progressSteps+1)
	for range progressSteps {
		want = append(want, method)
	}
	want = append(want, "result")
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("client read %v, want every %s before the result: %v", seen, method, want)
	}
}

// The SDK client hands an upstream's progress notifications to a goroutine
// while it completes the call the result answers; passthrough must still
// relay every notification the upstream sent before its result, before
// that result.
func TestPassthroughRelaysProgressBeforeResult(t *testing.T) {
	g := passthroughGateway(t, stepsUpstream(t))
	ctx := context.Background()
	wire := &wireLog{}
	cs := memClient(t, g, slowWrites, wire.wrap, nil)
	defer cs.Close()
	for i := range 3 {
		before := len(wire.list())
		res, err := cs.CallTool(ctx, progressParams(fmt.Sprint("tok-", i)))
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		wantProgressFirst(t, wire.list()[before:])
	}
}

// Log messages an upstream sends during a call reach the caller before the
// call's result, as they do progress: the conformance suite's
// tools-call-with-logging lost the last one about one run in three when a
// result overtook it (it then went to the standalone stream, after the
// request it was about had ended).
func TestPassthroughRelaysLogsBeforeResult(t *testing.T) {
	g := passthroughGateway(t, stepsUpstream(t))
	ctx := context.Background()
	wire := &wireLog{}
	cs := memClient(t, g, slowWrites, wire.wrap, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	defer cs.Close()
	// (On 2025-11-25: the 2026-07-28 revision takes the level from each
	// request's _meta instead.)
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := len(wire.list())
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "logs", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		wantFirst(t, wire.list()[before:], "notifications/message")
	}
}

// Over streamable HTTP, a notification or request about a client's request
// belongs on that request's own stream: a client need not open the
// standalone GET stream, and one that has not yet would lose what is sent
// there.
func TestPassthroughHTTPRelaysOnTheRequestStream(t *testing.T) {
	g := passthroughGateway(t, stepsUpstream(t))
	front := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(front.Close)
	ctx := context.Background()
	wire := &wireLog{}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1}
	// 2025-11-25: stateful sessions, whose streams carry what is sent
	// during a request (the stateless revision answers in plain JSON).
	cs, err := client.Connect(ctx, loggedTransport{tr, wire}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	before := len(wire.list())
	res, err := cs.CallTool(ctx, progressParams("tok"))
	if err != nil || res.IsError {
		t.Fatalf("steps: %v %+v", err, res)
	}
	wantProgressFirst(t, wire.list()[before:])

	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("ask: %v %+v", err, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "sampled" {
		t.Fatalf("ask answered %+v, want the client's sample", res.Content)
	}
}
