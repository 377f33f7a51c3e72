package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// TestAuditFailureMessageHasNoPath: when the audit log cannot record a
// call, the call does not run and the model is told so, without the audit
// file's path (or any path of the state folder); the operator's log has it.
func TestAuditFailureMessageHasNoPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(g *Gateway)
	}{
		{"closed", func(g *Gateway) { g.audit.Close() }},
		{"truncated", func(g *Gateway) { os.Truncate(g.AuditPath(), 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := echoUpstream(t)
			g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
			ctx := context.Background()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
				t.Fatal(err)
			}
			tc.break_(g)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "x"}}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if !res.IsError || !strings.Contains(string(b), "audit log could not record it") {
				t.Fatalf("call with a broken audit log: %s", b)
			}
			if dir := filepath.Dir(g.AuditPath()); strings.Contains(string(b), dir) || strings.Contains(string(b), "audit.jsonl") {
				t.Fatalf("the result shows the audit file's path: %s", b)
			}
		})
	}
}

// TestAuditHeadInStatusAndMetrics: /status and /metrics carry the chain's
// last seq (and /status its hash), for a monitor to keep elsewhere.
func TestAuditHeadInStatusAndMetrics(t *testing.T) {
	url := echoUpstream(t)
	g, cs := newTestGateway(t, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
		t.Fatal(err)
	}
	head := g.audit.Head()
	if head.Seq < 2 || len(head.Hash) != 64 {
		t.Fatalf("head %+v", head)
	}
	// httptest's default Host (example.com) is one the host guard refuses.
	get := func(path string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = "localhost"
		return r
	}
	rec := httptest.NewRecorder()
	g.HTTPHandler().ServeHTTP(rec, get("/status"))
	var st Status
	if err := json.NewDecoder(rec.Body).Decode(&st); err != nil || st.Audit == nil || *st.Audit != head {
		t.Fatalf("/status audit = %+v (%v), want %+v", st.Audit, err, head)
	}
	rec = httptest.NewRecorder()
	g.HTTPHandler().ServeHTTP(rec, get("/metrics"))
	body, _ := io.ReadAll(rec.Body)
	if want := "toolgate_audit_seq " + strconv.FormatUint(head.Seq, 10); !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}
