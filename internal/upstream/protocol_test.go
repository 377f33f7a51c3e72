package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// versionServer is a server that answers a tool call with the protocol
// revision its client asked for.
func versionServer(supported []string) func(*config.Server) mcp.Transport {
	return func(*config.Server) mcp.Transport {
		ct, st := mcp.NewInMemoryTransports()
		srv := mcp.NewServer(&mcp.Implementation{Name: "v", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: supported})
		srv.AddTool(&mcp.Tool{Name: "version", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			v := ""
			if p := req.Session.InitializeParams(); p != nil {
				v = p.ProtocolVersion
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil
		})
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			panic(err)
		}
		return ct
	}
}

// TestProtocolVersionOffered: upstreams are spoken to in 2025-11-25 (not
// the SDK's newest, whose per-request metadata costs on every call); with
// a server supporting only older revisions the session still works; the
// option overrides it.
func TestProtocolVersionOffered(t *testing.T) {
	for _, tc := range []struct {
		name, option string
		supported    []string
		want         string
	}{
		{"default", "", nil, ProtocolVersion},
		{"older server", "", []string{"2025-06-18", "2025-03-26"}, ProtocolVersion}, // which negotiates down, and works
		{"option", "2026-07-28", nil, "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Options{Transport: versionServer(tc.supported), ConnectTimeout: 5 * time.Second, ProtocolVersion: tc.option})
			defer m.Close()
			s, err := m.Add(&config.Server{Name: "s", Command: "unused", Transport: config.TransportStdio})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.CallTool(context.Background(), "version", map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != tc.want {
				t.Fatalf("the client asked for %q, want %q", got, tc.want)
			}
		})
	}
}
