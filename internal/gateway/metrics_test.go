package gateway

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// TestMetricsFollowDecisions drives calls through the gateway and reads
// /metrics: allowed and refused calls, and call latency, by server.
func TestMetricsFollowDecisions(t *testing.T) {
	url := echoUpstream(t)
	g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
	ctx := context.Background()
	callTool := func(name string, args map[string]any) {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}
	callTool("call_tool", map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "x"}}) // refused: not searched
	callTool("search_tools", map[string]any{"query": "echo"})
	callTool("call_tool", map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "x"}})

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "localhost"
	g.HTTPHandler().ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`toolgate_call_decisions_total{action="block",rule="discovery_gate",server="up"} 1`,
		`toolgate_call_decisions_total{action="allow",rule="",server="up"} 1`,
		`toolgate_tool_calls_total{outcome="ok",server="up"} 1`,
		`toolgate_tool_call_duration_seconds_count{server="up"} 1`,
		`toolgate_searches_total 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// TestMetricsLabelsAreNotClientChosen: a client calling tools of servers
// that do not exist must not mint a time series per name it makes up.
func TestMetricsLabelsAreNotClientChosen(t *testing.T) {
	url := echoUpstream(t)
	g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
	ctx := context.Background()
	for _, name := range []string{"client_made_label_one__x", "client_made_label_two__y", "up__no_such_tool"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": name, "arguments": map[string]any{}}}); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "localhost"
	g.HTTPHandler().ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	if strings.Contains(string(body), "client_made_label") {
		t.Errorf("/metrics carries a client-chosen server name:\n%s", body)
	}
	for _, want := range []string{
		`toolgate_call_decisions_total{action="block",rule="discovery_gate",server="unknown"} 2`,
		`toolgate_call_decisions_total{action="block",rule="discovery_gate",server="up"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
