package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// allowPrivateNetworks is a load filter that lets run-time loads reach
// loopback, as load_control's "deny_private_networks": false does, for
// tests whose servers listen there.
type allowPrivateNetworks struct{}

func (allowPrivateNetworks) ID() string             { return "dev.toolgate-test/allow_private_networks" }
func (allowPrivateNetworks) Phase() extension.Phase { return extension.PhaseAdmit }
func (allowPrivateNetworks) FilterLoad(_ context.Context, r *extension.LoadRequest) error {
	r.AllowPrivateNetworks = true
	return nil
}

// TestLoadRefusesPrivateNetworksByDefault: with no filter configured, a
// run-time load of a loopback server is refused before a connection is
// made (deny_private_networks is on by default for run-time loads), while a
// configured server on loopback still connects.
func TestLoadRefusesPrivateNetworksByDefault(t *testing.T) {
	var hits atomic.Int64
	inner := echoUpstream(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	g, cs := newTestGateway(t, map[string]*config.Server{"configured": {URL: inner + "/", Transport: config.TransportStreamableHTTP}})
	if _, ok := g.Catalog().Lookup("configured__echo"); !ok {
		t.Fatal("a configured loopback server did not connect")
	}
	for _, u := range []string{srv.URL + "/mcp", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/mcp", inner + "/"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_mcp_server", Arguments: map[string]any{"server_name": "local", "url": u}})
		if err != nil {
			t.Fatal(err)
		}
		txt := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.Contains(txt, "deny_private_networks") {
			t.Fatalf("load of %s: isError=%v %s", u, res.IsError, txt)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d request(s)", n)
	}
}
