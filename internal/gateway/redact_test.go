package gateway

//lint:file-ignore SA1019 the seal must mask the deprecated sampling and logging messages too, so the test sends them.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/secrets"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSealMasksEveryMessage checks seal on an in-memory session: results,
// protocol errors, plain errors, notifications and server-to-client
// requests all reach the client masked, whichever handler produced them,
// and the shared params a handler sends are not modified.
func TestSealMasksEveryMessage(t *testing.T) {
	const secret = "s3cr3t-Value-42"
	g := &Gateway{redact: secrets.NewRedactor(secret), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	shared := &mcp.LoggingMessageParams{Level: "error", Logger: secret, Data: map[string]any{"k": secret}}
	s.AddTool(&mcp.Tool{Name: "t", Description: secret, InputSchema: map[string]any{"type": "object", "properties": map[string]any{secret: map[string]any{"description": secret}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.Log(ctx, shared)
			if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{SystemPrompt: secret, MaxTokens: 1,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: secret}}}}); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: secret}}, StructuredContent: map[string]any{"v": secret}, Meta: mcp.Meta{"m": secret}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "rpc", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32050, Message: "bad " + secret, Data: []byte(`{"d":"` + secret + `"}`)}
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "prompts/list" {
				return nil, errors.New("plain error " + secret)
			}
			return next(ctx, method, req)
		}
	})
	g.seal(s)

	wire := &lockedBuf{}
	var sampled string
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled = req.Params.SystemPrompt
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
		LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) {},
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := client.Connect(ctx, &mcp.LoggingTransport{Transport: ct, Writer: wire}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rpc", Arguments: map[string]any{}}); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("rpc error: %v", err)
	}
	if _, err := cs.ListPrompts(ctx, nil); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("plain error: %v", err)
	}
	if sampled != secrets.Mask {
		t.Fatalf("sampling system prompt = %q", sampled)
	}
	if strings.Contains(wire.String(), secret) {
		t.Fatalf("the client received the secret:\n%s", wire)
	}
	if n := strings.Count(wire.String(), secrets.Mask); n < 10 {
		t.Fatalf("%d masks on the wire; messages did not arrive:\n%s", n, wire)
	}
	if shared.Logger != secret {
		t.Fatal("seal modified the params the handler sent")
	}
}
