package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

func TestSameURL(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://api.example.com/mcp", "https://API.example.com/mcp/", true},
		{"https://api.example.com/mcp", "https://api.example.com/mcp?x=1", false},
		{"https://api.example.com/mcp", "http://api.example.com/mcp", false},
		{"https://api.example.com/mcp", "https://api.example.com.evil.com/mcp", false},
		{"https://api.example.com/mcp", "https://api.example.com@evil.com/mcp", false},
		{"https://api.example.com/mcp", "https://evil.com/https://api.example.com/mcp", false},
		{"https://api.example.com/mcp", "https://api.example.com:8443/mcp", false},
	}
	for _, tt := range tests {
		if got := sameURL(tt.a, tt.b); got != tt.want {
			t.Errorf("sameURL(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func TestAuthFailure(t *testing.T) {
	for msg, want := range map[string]bool{
		"POST: 401 Unauthorized":        true,
		"forbidden: token lacks scope":  true,
		"connection refused":            false,
		"tool error: file not found":    false,
		"server said: Unauthorised use": true,
	} {
		if got := authFailure(errors.New(msg)); got != want {
			t.Errorf("authFailure(%q) = %v", msg, got)
		}
	}
}

// authServer is an MCP server over HTTP that requires a bearer token.
type authServer struct {
	mu   sync.Mutex
	want string
	seen []seenRequest
	srv  *httptest.Server
}

func newAuthServer(t *testing.T, want string) *authServer {
	a := &authServer{want: want}
	s := mcp.NewServer(&mcp.Implementation{Name: "secured", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says who the caller is authenticated as"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "authenticated"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, seenRequest{auth: r.Header.Get("Authorization"), session: r.Header.Get("Mcp-Session-Id")})
		ok := r.Header.Get("Authorization") == "Bearer "+a.want
		a.mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authServer) setWant(v string) { a.mu.Lock(); a.want = v; a.mu.Unlock() }

// seenRequest is what authServer remembers of one request.
type seenRequest struct {
	auth    string // the Authorization header
	session string // Mcp-Session-Id, empty on initialize
}

func (a *authServer) headers() []seenRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seenRequest(nil), a.seen...)
}

func TestTokensRotationAndRunTimeLoads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tokensPath := filepath.Join(dir, "tokens")
	os.WriteFile(tokensPath, []byte("secured=tok-first-123456\nrogue=tok-rogue-123456\n"), 0o600)
	srv := newAuthServer(t, "tok-first-123456")

	red := secrets.NewRedactor()
	tokens, err := secrets.OpenTokens(dir, func(string) (string, bool) { return "", false }, red)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Dir: dir, Servers: map[string]*config.Server{
		"secured": {Name: "secured", URL: srv.srv.URL + "/mcp", Transport: config.TransportStreamableHTTP},
	}, Filters: config.Filters{SimilarityThreshold: 0.1}}
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), Tokens: tokens, Redactor: red, Extensions: []extension.Extension{allowPrivateNetworks{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.Catalog().Lookup("secured__whoami"); !ok {
		t.Fatalf("configured server with its token did not connect: %v", g.Upstreams().Servers()[0].Status())
	}
	ct, st := mcp.NewInMemoryTransports()
	g.Connect(ctx, st)
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()
	callTool := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	resText := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }
	callTool("search_tools", map[string]any{"query": "who is the caller authenticated as"})
	if r := callTool("call_tool", map[string]any{"tool_name": "secured__whoami"}); r.IsError {
		t.Fatalf("call: %s", resText(r))
	}

	// The token expires upstream: the LLM is told what to do, without the
	// token and without the tokens file's path.
	srv.setWant("tok-second-123456")
	r := callTool("call_tool", map[string]any{"tool_name": "secured__whoami"})
	if !r.IsError || !strings.Contains(resText(r), "tokens file") || !strings.Contains(resText(r), `"secured"`) ||
		strings.Contains(resText(r), "tok-") || strings.Contains(resText(r), dir) {
		t.Fatalf("401 message: %s", resText(r))
	}
	// Rotation: the next request reads the new value; no restart.
	os.WriteFile(tokensPath, []byte("secured=tok-second-123456\n"), 0o600)
	if r := callTool("call_tool", map[string]any{"tool_name": "secured__whoami"}); r.IsError {
		t.Fatalf("after rotation: %s", resText(r))
	}

	// A run-time load under another name, of the same URL, gets no token.
	// The configured server's own session may still send requests (its
	// standalone stream reconnects with the rotated token), so only requests
	// outside the sessions that existed before the load are the load's.
	before := len(srv.headers())
	known := map[string]bool{}
	for _, h := range srv.headers() {
		known[h.session] = h.session != ""
	}
	r = callTool("load_mcp_server", map[string]any{"server_name": "rogue", "url": srv.srv.URL + "/mcp"})
	if !r.IsError {
		t.Fatalf("rogue load succeeded without a token?! %s", resText(r))
	}
	for _, h := range srv.headers()[before:] {
		if !known[h.session] && h.auth != "" {
			t.Fatalf("run-time load sent Authorization %q", h.auth)
		}
	}
	// Loading the configured name at another URL is refused (name taken).
	r = callTool("load_mcp_server", map[string]any{"server_name": "secured", "url": "http://127.0.0.1:1/mcp"})
	if !r.IsError || !strings.Contains(resText(r), "already connected") {
		t.Fatalf("duplicate: %s", resText(r))
	}
}
