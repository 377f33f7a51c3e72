package upstream

//lint:file-ignore SA1019 the test has a server ask for roots, which SEP-2577 deprecates with a long window.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/relay"
)

// chattyServer is echoServer plus a tool that, before answering, asks the
// client for its roots and says the tool list changed, on the call's own
// stream.
func chattyServer() *mcp.Server {
	s := echoServer()
	s.AddTool(&mcp.Tool{Name: "chatty", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_, rootsErr := req.Session.ListRoots(ctx, nil)
		s.AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		text := "roots: ok"
		if rootsErr != nil {
			text = "roots: " + rootsErr.Error()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	return s
}

// The raw leg of a streamable HTTP server: a call goes out as bytes and
// comes back as the server's bytes; what else the call's stream carries is
// handled as the SDK client would with no handlers; a POST the server
// refuses (here an expired session) is left to the SDK's leg, which
// reconnects, and nothing is sent twice.
func TestHTTPLegCalls(t *testing.T) {
	up := chattyServer()
	var calls, refuseNext atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
			if refuseNext.CompareAndSwap(1, 0) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		if r.Method == http.MethodPost {
			calls.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var changed atomic.Int32
	m := NewManager(Options{ConnectTimeout: 5 * time.Second, OnToolsChanged: func(string) { changed.Add(1) }})
	defer m.Close()
	s, err := m.Add(&config.Server{Name: "up", URL: srv.URL, Transport: config.TransportStreamableHTTP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := s.RawCall(ctx, relay.AppendCallParams(nil, "echo", []byte(`{"message":"hi"}`), nil))
	if err != nil || !strings.Contains(string(res.Result), `"Echo: hi"`) {
		t.Fatalf("echo on the raw leg: %v %s", err, res.Result)
	}
	res, err = s.RawCall(ctx, relay.AppendCallParams(nil, "nosuch", []byte(`{}`), nil))
	if err != nil || res.Error == nil && !strings.Contains(string(res.Result), `"isError":true`) {
		t.Fatalf("an unknown tool: %v %s %s", err, res.Result, res.Error)
	}

	// The client declares roots (as the SDK client does) but has none:
	// the request is answered with an empty list, as the SDK client
	// answers it; the changed list is noted.
	res, err = s.RawCall(ctx, relay.AppendCallParams(nil, "chatty", []byte(`{}`), nil))
	if err != nil || !strings.Contains(string(res.Result), "roots: ok") {
		t.Fatalf("chatty: %v %s", err, res.Result)
	}
	for deadline := time.Now().Add(5 * time.Second); changed.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a tool list change on the call's stream was not noted")
		}
	}

	// A refused POST: the raw leg gives way (ErrNoRaw) and the server
	// never saw the call; the SDK's leg then serves it.
	before := calls.Load()
	refuseNext.Store(1)
	if _, err := s.RawCall(ctx, relay.AppendCallParams(nil, "echo", []byte(`{"message":"again"}`), nil)); !errors.Is(err, ErrNoRaw) {
		t.Fatalf("a refused raw call: %v; want ErrNoRaw", err)
	}
	if calls.Load() != before {
		t.Fatalf("the refused call reached the server")
	}
	out, err := s.Call(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "again"}})
	if err != nil || out.Content[0].(*mcp.TextContent).Text != "Echo: again" {
		t.Fatalf("the SDK's leg after the refusal: %v %+v", err, out)
	}
}

// A caller that gives up cancels the call upstream, as the SDK client
// does: the server's handler sees its context end.
func TestHTTPLegCancels(t *testing.T) {
	up := echoServer()
	cancelled := make(chan struct{})
	started := make(chan struct{})
	up.AddTool(&mcp.Tool{Name: "waits", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	defer srv.Close()
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	s, err := m.Add(&config.Server{Name: "up", URL: srv.URL, Transport: config.TransportStreamableHTTP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.RawCall(ctx, relay.AppendCallParams(nil, "waits", []byte(`{}`), nil))
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the server")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was never cancelled")
	}
}

// Calls on the raw leg reuse one keep-alive connection: the rest of a
// call's stream after its answer is read, so the connection goes back to
// the pool instead of being closed and a new one dialled per call.
func TestHTTPLegReusesTheConnection(t *testing.T) {
	slowDrain(t)
	up := echoServer()
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	s, err := m.Add(&config.Server{Name: "up", URL: srv.URL, Transport: config.TransportStreamableHTTP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func() {
		t.Helper()
		res, err := s.RawCall(ctx, relay.AppendCallParams(nil, "echo", []byte(`{"message":"hi"}`), nil))
		if err != nil || !strings.Contains(string(res.Result), `"Echo: hi"`) {
			t.Fatalf("echo on the raw leg: %v %s", err, res.Result)
		}
	}
	call() // the first call may open the leg's connection
	before := dials.Load()
	for range 20 {
		call()
	}
	if n := dials.Load() - before; n != 0 {
		t.Fatalf("20 calls opened %d new connections to the server; want them on the kept-alive one", n)
	}
}

// Concurrent calls keep their connections too: the default client keeps
// as many idle connections to a server as calls run at once (net/http's
// default keeps two, and closes the rest after every burst).
func TestHTTPConcurrentCallsReuseConnections(t *testing.T) {
	slowDrain(t)
	up := echoServer()
	var dials atomic.Int32
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	s, err := m.Add(&config.Server{Name: "up", URL: srv.URL, Transport: config.TransportStreamableHTTP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const callers, rounds = 8, 10
	before := dials.Load()
	for range rounds {
		errs := make(chan error, callers)
		for range callers {
			go func() {
				res, err := s.RawCall(ctx, relay.AppendCallParams(nil, "echo", []byte(`{"message":"hi"}`), nil))
				if err == nil && !strings.Contains(string(res.Result), `"Echo: hi"`) {
					err = errors.New("unexpected answer " + string(res.Result))
				}
				errs <- err
			}()
		}
		for range callers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	// About one connection per caller (and the session's own stream). A
	// connection goes back to the pool on the transport's own goroutine,
	// so a round that starts at once may still dial one or two more; the
	// old client, which kept two, redialled six per round (over 60).
	if n := dials.Load() - before; n > 2*callers {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections; want at most %d", rounds, callers, n, 2*callers)
	}
}

// slowDrain lets a call's stream end be read however loaded the machine
// is: the connection tests check that it is read, not how fast.
func slowDrain(t *testing.T) {
	old := drainWait
	drainWait = 5 * time.Second
	t.Cleanup(func() { drainWait = old })
}
