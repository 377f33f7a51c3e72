// Package exttest holds what the built-in extensions' tests share: an event
// recorder to hand an extension as its Host.Emit, and the check that every
// JSON example in an extension's README decodes with its factory.
package exttest

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/readme"
)

// Recorder collects emitted events; it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []extension.Event
}

// Emit records e; pass it as extension.Host.Emit.
func (r *Recorder) Emit(_ context.Context, e extension.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Take returns the events recorded since the last Take and forgets them.
func (r *Recorder) Take() []extension.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []extension.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]extension.Event(nil), r.events...)
}

// ReadmeExamples fails t unless README.md in the test's folder has at least
// one JSON example of filters.<key> and every one builds with factory.
func ReadmeExamples(t *testing.T, key string, factory extension.Factory) {
	t.Helper()
	ex, err := readme.Examples("README.md", key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) == 0 {
		t.Fatalf("README.md has no JSON example of filters.%s", key)
	}
	for i, raw := range ex {
		if _, err := factory(raw); err != nil {
			t.Errorf("README example %d: %v\n%s", i+1, err, raw)
		}
	}
}

// Call runs req through e's call middleware (if any) to an upstream that
// answers with an empty result, and returns the middleware's error.
func Call(e extension.Extension, ctx context.Context, req *extension.CallRequest) error {
	_, err := CallSeen(e, ctx, req)
	return err
}

// CallSeen is Call that also returns the request the upstream received.
func CallSeen(e extension.Extension, ctx context.Context, req *extension.CallRequest) (*extension.CallRequest, error) {
	seen := req
	h := func(_ context.Context, r *extension.CallRequest) (*extension.CallResult, error) {
		seen = r
		return extension.NewCallResult(&mcp.CallToolResult{Content: []mcp.Content{}}), nil
	}
	if m, ok := e.(extension.CallMiddleware); ok {
		if _, err := m.WrapCall(h)(ctx, req); err != nil {
			return nil, err
		}
		return seen, nil
	}
	_, err := h(ctx, req)
	return seen, err
}

// CallFunc is Call as a function of the request.
func CallFunc(e extension.Extension) func(ctx context.Context, req *extension.CallRequest) error {
	return func(ctx context.Context, req *extension.CallRequest) error { return Call(e, ctx, req) }
}

// Respond runs req through e's call middleware to an upstream that answers
// with res, and returns the result the middleware passes on.
func Respond(e extension.Extension, ctx context.Context, req *extension.CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	h := func(context.Context, *extension.CallRequest) (*extension.CallResult, error) {
		return extension.NewCallResult(res), nil
	}
	if m, ok := e.(extension.CallMiddleware); ok {
		h = m.WrapCall(h)
	}
	out, err := h(ctx, req)
	if err != nil {
		return nil, err
	}
	return out.Result()
}

// Provision provisions e if it is a Provisioner.
func Provision(e extension.Extension, ctx context.Context, h extension.Host) error {
	if p, ok := e.(extension.Provisioner); ok {
		return p.Provision(ctx, h)
	}
	return nil
}
