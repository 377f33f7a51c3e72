package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

// TestLoadRefusesCrossOriginRedirect: a server at an allowed URL that
// redirects elsewhere must not get the gateway connected to the other host.
func TestLoadRefusesCrossOriginRedirect(t *testing.T) {
	target := echoUpstream(t) // a real MCP server on another origin
	hits := 0
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Redirect(w, r, target+"/", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	g, cs := newTestGateway(t, map[string]*config.Server{}, allowPrivateNetworks{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_mcp_server", Arguments: map[string]any{"server_name": "hop", "url": redirector.URL + "/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || hits == 0 {
		t.Fatalf("load through a cross-origin redirect: isError=%v hits=%d %v", res.IsError, hits, res.Content)
	}
	if _, ok := g.Catalog().Lookup("hop__echo"); ok {
		t.Fatal("the redirect target's tools were catalogued")
	}
}

// TestLoadRefusesConfiguredNameAtAnotherURL: a disabled configured server's
// name cannot be taken by a run-time load of a different URL.
func TestLoadRefusesConfiguredNameAtAnotherURL(t *testing.T) {
	other := echoUpstream(t)
	_, cs := newTestGateway(t, map[string]*config.Server{
		"github": {URL: "https://api.github.example/mcp", Transport: config.TransportStreamableHTTP, Disabled: true},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_mcp_server", Arguments: map[string]any{"server_name": "github", "url": other + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "belongs to a server in the config") {
		t.Fatalf("load under a configured name: %v", res.Content)
	}
}

// TestRedactResultEverywhere: a secret is masked in _meta and resource
// links too, not only in text.
func TestRedactResultEverywhere(t *testing.T) {
	const canary = "CANARYsecret1234567890"
	g := &Gateway{redact: secrets.NewRedactor(canary)}
	res := &mcp.CallToolResult{
		Meta: mcp.Meta{"env": "x " + canary},
		Content: []mcp.Content{
			&mcp.TextContent{Text: "t " + canary},
			&mcp.ResourceLink{URI: "file:///" + canary, Name: canary},
		},
	}
	out := g.redactResult(res)
	b, _ := out.MarshalJSON()
	if strings.Contains(string(b), canary) || !strings.Contains(string(b), secrets.Mask) {
		t.Fatalf("result after redaction: %s", b)
	}
}

func TestServerNameCannotEndWithUnderscore(t *testing.T) {
	for _, n := range []string{"bank_", "_bank"} {
		if err := config.ValidateServerName(n); err == nil {
			t.Errorf("%q accepted", n)
		}
	}
}
