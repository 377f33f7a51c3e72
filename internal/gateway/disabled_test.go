package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// TestUnsetVariableDisablesOneServer: a server whose header names an unset
// variable is listed in /status as disabled with the reason, and
// load_mcp_server cannot connect it with the unresolved "$VAR" text.
func TestUnsetVariableDisablesOneServer(t *testing.T) {
	url := echoUpstream(t)
	cfg, err := config.Parse([]byte(`{"mcpServers":{
		"up":{"url":"`+url+`/"},
		"needs":{"url":"`+url+`/","headers":{"Authorization":"Bearer ${TOOLGATE_TEST_SURELY_UNSET}"}}
	}}`), "/etc/tg/config.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, cs := newTestGateway(t, cfg.Servers)
	var found bool
	for _, s := range g.Status().Servers {
		switch s.Name {
		case "needs":
			found = true
			if s.State != StateDisabled || !strings.Contains(s.LastError, "$TOOLGATE_TEST_SURELY_UNSET") || !strings.Contains(s.LastError, "headers.Authorization") {
				t.Errorf("needs: state %q error %q", s.State, s.LastError)
			}
		case "up":
			if s.State == StateDisabled {
				t.Errorf("up: disabled")
			}
		}
	}
	if !found {
		t.Errorf("/status does not list the disabled server: %+v", g.Status().Servers)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_mcp_server", Arguments: map[string]any{"server_name": "needs", "url": url + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, "TOOLGATE_TEST_SURELY_UNSET") {
		t.Fatalf("load of the disabled server: isError=%v %s", res.IsError, text)
	}
	if _, ok := g.Upstreams().Get("needs"); ok {
		t.Fatal("the disabled server was connected")
	}
}

// TestUnknownFilterKeyDidYouMean: a misspelt filters key names the key it
// was probably meant to be.
func TestUnknownFilterKeyDidYouMean(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"mcpServers":{},"filters":{"similarity_treshold":0.5}}`), "/etc/tg/config.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Options{Config: cfg, StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `unknown key "similarity_treshold" (did you mean "similarity_threshold"?)`) {
		t.Fatalf("error %v", err)
	}
}
