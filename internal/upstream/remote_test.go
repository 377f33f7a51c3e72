package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/netguard"
)

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + a.Message}}}, nil, nil
	})
	return s
}

// TestLegacySSEOutlivesTheConnectTimeout: a legacy SSE server keeps
// working after its start returned and after the connect timeout has
// passed. Before the fix the SSE stream was bound to the connect timeout's
// context, so the session closed as soon as the start returned ("client is
// closing").
func TestLegacySSEOutlivesTheConnectTimeout(t *testing.T) {
	s := echoServer()
	srv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	for _, transport := range []string{config.TransportSSE, config.TransportStreamableHTTP} { // the second falls back
		m := NewManager(Options{ConnectTimeout: 500 * time.Millisecond})
		up, err := m.Add(&config.Server{Name: "legacy", URL: srv.URL, Transport: transport})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := up.ListTools(ctx); err != nil {
			t.Fatalf("%s: list: %v", transport, err)
		}
		time.Sleep(700 * time.Millisecond) // past the connect timeout
		res, err := up.CallTool(ctx, "echo", map[string]any{"message": "later"})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "Echo: later" {
			t.Fatalf("%s: call after the connect timeout: %v %v", transport, res, err)
		}
		if st := up.Status(); st.Starts != 1 || st.Restarts != 0 {
			t.Fatalf("%s: the server was restarted: %+v", transport, st)
		}
		m.Close()
	}
}

// TestDialCheckRefusesBeforeConnecting: a server added with a dial check
// that refuses its address is never reached, the failure is classed as a
// refusal, and the HTTP client's proxy is not used for it.
func TestDialCheckRefusesBeforeConnecting(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		up, err := m.Add(&config.Server{Name: "guarded", URL: u + "/mcp", Transport: config.TransportStreamableHTTP}, WithDialCheck(netguard.DenyPrivate))
		if err != nil {
			t.Fatal(err)
		}
		_, err = up.ListTools(context.Background())
		if f := up.StartFailure(err); f.Class != FailureRefused || !errors.Is(f.Refusal, netguard.ErrPrivate) {
			t.Fatalf("%s: failure %+v (%v)", u, f, err)
		}
		m.Remove("guarded")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server got %d request(s)", n)
	}
	// Admitted: the same server is reached directly, not through the proxy.
	up, _ := m.Add(&config.Server{Name: "admitted", URL: srv.URL + "/mcp", Transport: config.TransportStreamableHTTP}, WithDialCheck(func(netip.AddrPort) error { return nil }))
	_, err := up.ListTools(context.Background())
	if hits.Load() == 0 {
		t.Fatalf("an admitted dial did not reach the server: %v", err)
	}
	if f := up.StartFailure(err); f.Class != FailureNotMCP && f.Class != FailureHTTPStatus && f.Class != FailureConnectionFailed {
		t.Logf("admitted non-MCP server classed as %+v", f)
	}
}

func TestStartFailureClasses(t *testing.T) {
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "secret page", http.StatusInternalServerError)
		}, "HTTP status 500"},
		{"html", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<h1>secret</h1>"))
		}, FailureNotMCP},
		{"json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"secret": true}`))
		}, FailureNotMCP},
	} {
		srv := httptest.NewServer(tt.handler)
		m := NewManager(Options{ConnectTimeout: 5 * time.Second})
		up, _ := m.Add(&config.Server{Name: "x", URL: srv.URL + "/mcp", Transport: config.TransportStreamableHTTP})
		_, err := up.ListTools(context.Background())
		if got := up.StartFailure(err).String(); got != tt.want {
			t.Errorf("%s: class %q, want %q (error: %v)", tt.name, got, tt.want, err)
		}
		m.Close()
		srv.Close()
	}
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	up, _ := m.Add(&config.Server{Name: "closed", URL: addr + "/mcp", Transport: config.TransportStreamableHTTP})
	_, err := up.ListTools(context.Background())
	if got := up.StartFailure(err).Class; got != FailureConnRefused {
		t.Errorf("closed port: class %q (error: %v)", got, err)
	}
}

// TestStartFailureListFailed: a real MCP server whose tools/list fails is
// reported as such, not as "not an MCP server", and without its message.
func TestStartFailureListFailed(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "nolist", Version: "1"}, nil)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, errors.New("secret internal detail")
			}
			return next(ctx, method, req)
		}
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	m := NewManager(Options{ConnectTimeout: 5 * time.Second})
	defer m.Close()
	up, _ := m.Add(&config.Server{Name: "x", URL: srv.URL, Transport: config.TransportStreamableHTTP})
	_, err := up.ListTools(context.Background())
	if f := up.StartFailure(err); f.Class != FailureListFailed || strings.Contains(f.String(), "secret") {
		t.Fatalf("class %+v (error: %v)", f, err)
	}
}
