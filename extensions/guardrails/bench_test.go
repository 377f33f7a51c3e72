package extmcp

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

// loopback serves f over TCP on 127.0.0.1 and builds the extension with the
// default transport, as a deployment would.
func loopback(b *testing.B, f pb.ExtMcpServer, methods string) *Guardrails {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterExtMcpServer(srv, f)
	go srv.Serve(ln)
	b.Cleanup(srv.Stop)
	e, err := New(json.RawMessage(`{"processors":[{"host":"` + ln.Addr().String() + `","methods":` + methods + `}]}`))
	if err != nil {
		b.Fatal(err)
	}
	g := e.(*Guardrails)
	if err := g.Provision(context.Background(), extension.Host{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// passer passes everything and records nothing, so memory stays flat.
type passer struct{ pb.UnimplementedExtMcpServer }

func (passer) CheckRequest(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error) {
	return passRequest(), nil
}

func (passer) CheckResponse(context.Context, *pb.McpResponse) (*pb.McpResponseResult, error) {
	return passResponse(), nil
}

// BenchmarkCallRequestLoopback is the latency one processor adds to a
// call_tool in the request phase: one CheckRequest round trip on loopback,
// with the params encoded and the answer (pass) decoded.
//
//	go test -run '^$' -bench Loopback -benchtime 3s ./extensions/guardrails
func BenchmarkCallRequestLoopback(b *testing.B) {
	g := loopback(b, passer{}, `{"tools/call":"request"}`)
	filter := exttest.CallFunc(g)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := (&extension.CallRequest{ToolName: "fs__read_file", ServerName: "fs", Tool: "read_file"}).WithArguments(map[string]any{"path": "/tmp/a.txt"})
		if err := filter(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallFullLoopback is a processor in the full phase: a
// CheckRequest and a CheckResponse per call.
func BenchmarkCallFullLoopback(b *testing.B) {
	g := loopback(b, passer{}, `{"tools/call":"full"}`)
	call, resp := exttest.CallFunc(g), (func(ctx context.Context, req *extension.CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
		return exttest.Respond(g, ctx, req, res)
	})
	ctx := context.Background()
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello from the sandbox\n"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := (&extension.CallRequest{ToolName: "fs__read_file", ServerName: "fs", Tool: "read_file"}).WithArguments(map[string]any{"path": "/tmp/a.txt"})
		if err := call(ctx, req); err != nil {
			b.Fatal(err)
		}
		if _, err := resp(ctx, req, res); err != nil {
			b.Fatal(err)
		}
	}
}
