package extmcp

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/toolgate/toolgate/extension"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

// fake is an in-process ExtMCP processor whose answers are functions; it
// records what it was sent.
type fake struct {
	pb.UnimplementedExtMcpServer
	onRequest  func(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error)
	onResponse func(context.Context, *pb.McpResponse) (*pb.McpResponseResult, error)

	mu        sync.Mutex
	requests  []*pb.McpRequest
	responses []*pb.McpResponse
}

func (f *fake) CheckRequest(ctx context.Context, r *pb.McpRequest) (*pb.McpRequestResult, error) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.mu.Unlock()
	if f.onRequest == nil {
		return passRequest(), nil
	}
	return f.onRequest(ctx, r)
}

func (f *fake) CheckResponse(ctx context.Context, r *pb.McpResponse) (*pb.McpResponseResult, error) {
	f.mu.Lock()
	f.responses = append(f.responses, r)
	f.mu.Unlock()
	if f.onResponse == nil {
		return passResponse(), nil
	}
	return f.onResponse(ctx, r)
}

func (f *fake) sent() ([]*pb.McpRequest, []*pb.McpResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.McpRequest(nil), f.requests...), append([]*pb.McpResponse(nil), f.responses...)
}

func passRequest() *pb.McpRequestResult {
	return &pb.McpRequestResult{Result: &pb.McpRequestResult_Pass{Pass: &pb.Pass{}}}
}

func passResponse() *pb.McpResponseResult {
	return &pb.McpResponseResult{Result: &pb.McpResponseResult_Pass{Pass: &pb.Pass{}}}
}

func mutateRequest(v any) *pb.McpRequestResult {
	b, _ := json.Marshal(v)
	return &pb.McpRequestResult{Result: &pb.McpRequestResult_Mutated{Mutated: b}}
}

func mutateResponse(v any) *pb.McpResponseResult {
	b, _ := json.Marshal(v)
	return &pb.McpResponseResult{Result: &pb.McpResponseResult_Mutated{Mutated: b}}
}

func denyRequest(code pb.AuthorizationError_Code, reason string) *pb.McpRequestResult {
	return &pb.McpRequestResult{Result: &pb.McpRequestResult_Error{Error: &pb.AuthorizationError{Code: code, Reason: reason}}}
}

// net is a set of in-process listeners by host; a host without one refuses
// connections.
type fakeNet struct {
	mu  sync.Mutex
	lis map[string]*bufconn.Listener
}

// serve starts f at host and stops it when the test ends; stop stops it
// earlier.
func (n *fakeNet) serve(t testing.TB, host string, f *fake) (stop func()) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pb.RegisterExtMcpServer(srv, f)
	go srv.Serve(lis)
	n.mu.Lock()
	if n.lis == nil {
		n.lis = map[string]*bufconn.Listener{}
	}
	n.lis[host] = lis
	n.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			n.mu.Lock()
			delete(n.lis, host)
			n.mu.Unlock()
			srv.Stop()
		})
	}
	t.Cleanup(stop)
	return stop
}

func (n *fakeNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	lis := n.lis[addr]
	n.mu.Unlock()
	if lis == nil {
		return nil, &net.OpError{Op: "dial", Net: "bufconn", Err: errRefused}
	}
	return lis.DialContext(ctx)
}

type refused struct{}

func (refused) Error() string { return "connection refused" }

var errRefused = refused{}

// build makes, provisions and returns the extension for cfg (JSON) with its
// connections dialing n.
func (n *fakeNet) build(t testing.TB, cfg string) *Guardrails {
	t.Helper()
	return n.buildHost(t, cfg, extension.Host{})
}

// buildHost is build with a given Host.
func (n *fakeNet) buildHost(t testing.TB, cfg string, h extension.Host) *Guardrails {
	t.Helper()
	e, err := New(json.RawMessage(cfg))
	if err != nil {
		t.Fatalf("New(%s): %v", cfg, err)
	}
	g := e.(*Guardrails)
	g.dialOptions = []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(n.dial),
	}
	if err := g.Provision(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
