package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// recordingTransport notes the URL of every request, to show which
// discovery steps a client took.
type recordingTransport struct {
	mu   sync.Mutex
	urls []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	r.mu.Lock()
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	r.urls = append(r.urls, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, status))
	r.mu.Unlock()
	return resp, err
}

// TestAuthSDKClientDiscovery: the official Go SDK's client, given only
// its client id and secret, finds its way in by itself as the MCP
// authorization spec describes: 401 with resource_metadata → toolgate's
// protected resource metadata → the provider's metadata → a token for
// toolgate's resource → the call.
func TestAuthSDKClientDiscovery(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	resource := "http://" + addr + "/mcp"
	issuer := startOIDC(t, []map[string]any{{"id": "sdk-agent", "secret": "sdk-secret", "audience": resource}})

	cfgPath := coreConfig(t, everythingOnly())
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	_ = json.Unmarshal(b, &cfg)
	cfg["auth"] = map[string]any{"oidc": map[string]any{"issuer": issuer, "audience": resource, "required_scopes": []string{"mcp"}}}
	if err := os.WriteFile(cfgPath, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startHTTP(t, cfgPath, "--listen", addr)
	if g.URL != resource {
		t.Fatalf("gateway at %s, want %s", g.URL, resource)
	}

	rec := &recordingTransport{}
	hc := &http.Client{Transport: rec}
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: "sdk-agent", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "sdk-secret"}},
		HTTPClient:  hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: resource, OAuthHandler: h, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("the SDK client did not get in: %v\nrequests: %v", err, rec.urls)
	}
	defer cs.Close()
	res := call(t, cs, "search_tools", map[string]any{"query": "echo a message back", "top_k": 1})
	if got := found(t, res); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search after the discovery flow: %v", got)
	}
	rec.mu.Lock()
	steps := slices.Clone(rec.urls)
	rec.mu.Unlock()
	t.Logf("requests: %v", steps)
	for _, want := range []string{"POST /mcp 401", "GET /.well-known/oauth-protected-resource/mcp 200", "POST /oauth/token 200", "POST /mcp 200"} {
		if !slices.Contains(steps, want) {
			t.Fatalf("the flow lacks %q: %v", want, steps)
		}
	}
}
