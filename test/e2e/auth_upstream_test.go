package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// identityServer is a streamable-HTTP MCP server (in this test process)
// that knows a set of bearer tokens, each standing for an identity. It
// lists its tools to anyone but runs a tool only for a known token, and
// its whoami tool answers the identity of the token that came with the
// call. It records which identities used each upstream session.
type identityServer struct {
	url string

	mu       sync.Mutex
	tokens   map[string]string   // token → identity
	sessions map[string][]string // Mcp-Session-Id → identities seen
}

func newIdentityServer(t *testing.T, name string, tokens map[string]string) *identityServer {
	is := &identityServer{tokens: tokens, sessions: map[string][]string{}}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Tell which account of the " + name + " service this call runs as"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		id := is.identity(req.Extra.Header.Get("Authorization"))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " account: " + id}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		id := is.identity(r.Header.Get("Authorization"))
		if id == "" && bytes.Contains(body, []byte(`"tools/call"`)) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && id != "" {
			is.mu.Lock()
			if seen := is.sessions[sid]; len(seen) == 0 || seen[len(seen)-1] != id {
				is.sessions[sid] = append(seen, id)
			}
			is.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	is.url = srv.URL + "/mcp"
	return is
}

func (is *identityServer) identity(authz string) string {
	tok, ok := strings.CutPrefix(authz, "Bearer ")
	if !ok {
		return ""
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.tokens[tok]
}

func (is *identityServer) setToken(tok, id string) {
	is.mu.Lock()
	is.tokens[tok] = id
	is.mu.Unlock()
}

// sharedSessions returns the upstream sessions that more than one
// identity used.
func (is *identityServer) sharedSessions() map[string][]string {
	is.mu.Lock()
	defer is.mu.Unlock()
	out := map[string][]string{}
	for sid, ids := range is.sessions {
		u := map[string]bool{}
		for _, id := range ids {
			u[id] = true
		}
		if len(u) > 1 {
			out[sid] = ids
		}
	}
	return out
}

// TestAuthPerPrincipalUpstreamTokens: the tokens file holds tokens per
// principal and per group; each principal reaches the upstream with its
// own (or its group's, or the shared one), on a session of its own, and a
// principal with none gets the 401 message, never another principal's
// token, even one in the same group as a principal who has one.
func TestAuthPerPrincipalUpstreamTokens(t *testing.T) {
	t.Parallel()
	tokAlice, tokOps, tokSre, tokLedgerAlice, tokShared := canary(t, "alice"), canary(t, "ops"), canary(t, "sre"), canary(t, "ledger-alice"), canary(t, "shared")
	vault := newIdentityServer(t, "vault", map[string]string{tokAlice: "alice", tokOps: "ops-team", tokSre: "sre-team", tokLedgerAlice: "WRONG-SERVER", tokShared: "WRONG-SERVER"})
	ledger := newIdentityServer(t, "ledger", map[string]string{tokLedgerAlice: "alice-ledger", tokShared: "service", tokAlice: "WRONG-SERVER"})

	cfgPath := coreConfig(t, map[string]any{"vault": map[string]any{"url": vault.url}, "ledger": map[string]any{"url": ledger.url}})
	dir := filepath.Dir(cfgPath)
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	_ = json.Unmarshal(b, &cfg)
	keys := []map[string]any{
		{"principal": "alice", "groups": []string{"dev"}, "sha256": sha256Hex("key-alice")},
		{"principal": "bob", "groups": []string{"ops"}, "sha256": sha256Hex("key-bob")},
		{"principal": "carol", "sha256": sha256Hex("key-carol")},
		// mallory shares alice's group: dev has no token of its own.
		{"principal": "mallory", "groups": []string{"dev"}, "sha256": sha256Hex("key-mallory")},
		// eve is in two groups whose tokens differ: she gets neither.
		{"principal": "eve", "groups": []string{"ops", "sre"}, "sha256": sha256Hex("key-eve")},
	}
	cfg["auth"] = map[string]any{"api_keys": keys}
	if err := os.WriteFile(cfgPath, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTokens := func(vaultAlice string) {
		t.Helper()
		data := "# vault: per principal and per group, no shared token\n" +
			"vault@alice=" + vaultAlice + "\n" +
			"vault@group:ops=" + tokOps + "\n" +
			"vault@group:sre=" + tokSre + "\n" +
			"# ledger: alice has her own, everyone else the shared one\n" +
			"ledger@alice=" + tokLedgerAlice + "\n" +
			"ledger=" + tokShared + "\n"
		if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens(tokAlice)
	g := startHTTP(t, cfgPath)

	whoami := func(cs *mcp.ClientSession, server string) *mcp.CallToolResult {
		t.Helper()
		res := call(t, cs, "search_tools", map[string]any{"query": "which account of the " + server + " service", "top_k": 1})
		tok := discoveryToken(t, res)
		return call(t, cs, "call_tool", map[string]any{"tool_name": server + "__whoami", "arguments": map[string]any{}, "discovery_token": tok})
	}
	alice, bob, carol, mallory, eve := connectAs(t, g.URL, "key-alice"), connectAs(t, g.URL, "key-bob"), connectAs(t, g.URL, "key-carol"), connectAs(t, g.URL, "key-mallory"), connectAs(t, g.URL, "key-eve")

	// Interleaved, so a connection shared by mistake would show.
	for range 2 {
		wantOK(t, "alice on vault (her own token)", whoami(alice, "vault"), "vault account: alice")
		wantOK(t, "bob on vault (his group's token)", whoami(bob, "vault"), "vault account: ops-team")
		wantRefused(t, "carol on vault (no token, no shared one)", whoami(carol, "vault"), "holds none for you", `vault@carol`)
		wantRefused(t, "mallory on vault (in alice's group, no token)", whoami(mallory, "vault"), "holds none for you", `vault@mallory`)
		wantRefused(t, "eve on vault (groups with different tokens)", whoami(eve, "vault"), "several groups", `vault@eve`)
		wantOK(t, "alice on ledger (her own token)", whoami(alice, "ledger"), "ledger account: alice-ledger")
		wantOK(t, "carol on ledger (the shared token)", whoami(carol, "ledger"), "ledger account: service")
		wantOK(t, "mallory on ledger (the shared token)", whoami(mallory, "ledger"), "ledger account: service")
	}
	for name, s := range map[string]*identityServer{"vault": vault, "ledger": ledger} {
		if shared := s.sharedSessions(); len(shared) > 0 {
			t.Fatalf("%s: upstream sessions used by several identities: %v", name, shared)
		}
	}

	// Rotation: alice's new token is used from the next call on, by her
	// only.
	tokAlice2 := canary(t, "alice2")
	vault.setToken(tokAlice2, "alice-rotated")
	writeTokens(tokAlice2)
	wantOK(t, "alice after rotation", whoami(alice, "vault"), "vault account: alice-rotated")
	wantRefused(t, "mallory after rotation", whoami(mallory, "vault"), "holds none for you")

	logs := g.Logs.String()
	for _, c := range []string{tokAlice, tokAlice2, tokOps, tokSre, tokLedgerAlice, tokShared} {
		if strings.Contains(logs, c) {
			t.Fatalf("a token reached the gateway's log")
		}
	}
	names := []string{}
	for _, s := range []*identityServer{vault, ledger} {
		s.mu.Lock()
		for _, ids := range s.sessions {
			names = append(names, strings.Join(ids, ","))
		}
		s.mu.Unlock()
	}
	sort.Strings(names)
	t.Logf("upstream sessions by identity: %v", names)
	noPanic(t, logs)
}
