package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAuthIntrospection: opaque access tokens from the real provider are
// checked at its RFC 7662 endpoint, toolgate authenticating as the
// resource's client (its secret read from .env); an inactive token, one
// for another resource, an expired one and garbage are refused with 401.
func TestAuthIntrospection(t *testing.T) {
	t.Parallel()
	issuer := startOIDC(t, []map[string]any{
		// The resource server's own client: zitadel answers introspection
		// only to a client the token's audience names.
		{"id": authAudience, "secret": "rs-secret"},
		{"id": "opaque-alice", "secret": "a", "groups": []string{"dev"}, "audience": authAudience, "opaque": true},
		{"id": "opaque-elsewhere", "secret": "e", "audience": "https://other.example/mcp", "opaque": true},
		{"id": "opaque-stale", "secret": "s", "audience": authAudience, "opaque": true, "ttl": -300},
	})
	var doc struct {
		Introspection string `json:"introspection_endpoint"`
	}
	getJSON(t, issuer+"/.well-known/openid-configuration", &doc)
	if doc.Introspection == "" {
		t.Fatal("the provider names no introspection endpoint")
	}

	cfgPath := coreConfig(t, everythingOnly())
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	_ = json.Unmarshal(b, &cfg)
	cfg["auth"] = map[string]any{"oidc": map[string]any{
		"issuer": issuer, "audience": authAudience, "required_scopes": []string{"mcp"},
		"introspection": map[string]any{"url": doc.Introspection, "client_id": authAudience, "client_secret": "$RS_SECRET"},
	}}
	cfg["filters"] = map[string]any{"access_control": map[string]any{"allow": []any{
		map[string]any{"group": "dev", "tools": []string{"everything__echo"}},
	}}}
	os.WriteFile(cfgPath, mustJSON(cfg), 0o600)
	os.WriteFile(filepath.Join(filepath.Dir(cfgPath), ".env"), []byte("RS_SECRET=rs-secret\n"), 0o600)
	g := startHTTP(t, cfgPath)

	alice := clientCredentials(t, issuer, "opaque-alice", "a", "mcp")
	if strings.Count(alice, ".") == 2 {
		t.Fatalf("the provider issued a JWT, not an opaque token")
	}
	cs := connectAs(t, g.URL, alice)
	res := call(t, cs, "search_tools", map[string]any{"query": "echo a message back"})
	if got := found(t, res); !slices.Contains(got, "everything__echo") || slices.Contains(got, "everything__get-sum") {
		t.Fatalf("alice (dev, from the introspection answer) finds %v; want echo only", got)
	}

	post := func(token string) *http.Response {
		req, _ := http.NewRequest("POST", g.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for what, tok := range map[string]string{
		"another resource's token": clientCredentials(t, issuer, "opaque-elsewhere", "e", "mcp"),
		"expired token":            clientCredentials(t, issuer, "opaque-stale", "s", "mcp"),
		"made-up token":            "not-a-token-the-provider-issued",
		"tampered token":           alice[:len(alice)-2] + "xy",
	} {
		resp := post(tok)
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("%s: %d %q; want 401 invalid_token", what, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp := post(alice); resp.StatusCode != 200 {
		t.Fatalf("alice's token again: %d", resp.StatusCode)
	}
	for _, s := range []string{alice, "rs-secret"} {
		if strings.Contains(g.Logs.String(), s) {
			t.Fatal("a token or the introspection secret reached the log")
		}
	}
	noPanic(t, g.Logs.String())
}
