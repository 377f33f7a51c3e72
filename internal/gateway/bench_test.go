package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

type echoIn struct {
	Message string `json:"message"`
}

// echoUpstream serves one "echo" tool over streamable HTTP.
func echoUpstream(tb testing.TB) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes back the message"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// newTestGateway starts a gateway over cfg and connects an in-memory client.
func newTestGateway(tb testing.TB, servers map[string]*config.Server, exts ...extension.Extension) (*Gateway, *mcp.ClientSession) {
	tb.Helper()
	ctx := context.Background()
	for n, s := range servers {
		s.Name = n
	}
	cfg := &config.Config{Servers: servers, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(ctx, Options{Config: cfg, StateDir: tb.TempDir(), Extensions: exts})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st); err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return g, cs
}

func BenchmarkCallToolViaGateway(b *testing.B) {
	url := echoUpstream(b)
	_, cs := newTestGateway(b, map[string]*config.Server{"up": {URL: url + "/", Transport: config.TransportStreamableHTTP}})
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil || res.IsError {
		b.Fatal(err, res)
	}
	p := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "hi"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkCallToolDirect(b *testing.B) {
	url := echoUpstream(b)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkCallToolInMemory measures the gateway's own cost per call: client,
// gateway and upstream talk over in-memory transports, so no syscall or
// process boundary is counted. Compare with BenchmarkCallToolInMemoryDirect.
func BenchmarkCallToolInMemory(b *testing.B) {
	ctx := context.Background()
	up := echoServer()
	cfg := &config.Config{Servers: map[string]*config.Server{"up": {Name: "up", Command: "in-memory", Transport: config.TransportStdio}},
		Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(ctx, Options{Config: cfg, StateDir: b.TempDir(), UpstreamTransport: func(*config.Server) mcp.Transport {
		ct, st := mcp.NewInMemoryTransports()
		go up.Run(ctx, st)
		return ct
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ct, st := mcp.NewInMemoryTransports()
	g.Connect(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "b", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil || res.IsError {
		b.Fatal(err, res)
	}
	p := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": "hi"}}}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkCallToolInMemoryDirect(b *testing.B) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	go echoServer().Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "b", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes back the message"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	return s
}

// BenchmarkCallToolInMemoryRedacted is BenchmarkCallToolInMemory with 20
// known secrets and a 64 KiB result that holds none of them: the price of
// seal's check on every result (with -benchmem, against
// BenchmarkCallToolInMemoryRedacted/none, the same call with no secret
// known).
func BenchmarkCallToolInMemoryRedacted(b *testing.B) {
	var vals []string
	for i := range 20 {
		vals = append(vals, fmt.Sprintf("secret-value-%02d-abcdef", i))
	}
	msg := strings.Repeat("lorem ipsum dolor sit amet ", 64*1024/27)
	for _, tc := range []struct {
		name string
		red  *secrets.Redactor
	}{{"none", nil}, {"20secrets", secrets.NewRedactor(vals...)}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			up := echoServer()
			cfg := &config.Config{Servers: map[string]*config.Server{"up": {Name: "up", Command: "in-memory", Transport: config.TransportStdio}},
				Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
			g, err := New(ctx, Options{Config: cfg, StateDir: b.TempDir(), Redactor: tc.red, UpstreamTransport: func(*config.Server) mcp.Transport {
				ct, st := mcp.NewInMemoryTransports()
				go up.Run(ctx, st)
				return ct
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			ct, st := mcp.NewInMemoryTransports()
			g.Connect(ctx, st)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "b", Version: "1"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil || res.IsError {
				b.Fatal(err, res)
			}
			p := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": msg}}}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}
