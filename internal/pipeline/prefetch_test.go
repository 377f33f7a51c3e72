package pipeline_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/extension"
	flow "github.com/toolgate/toolgate/extensions/cross_server"
	ratelimit "github.com/toolgate/toolgate/extensions/rate_limits"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// roundTrips counts what a client sends to Redis: one per command outside
// a pipeline, one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// With rate_limits and cross_server on shared state, a call costs one
// Redis round trip (both scripts in one pipeline), and the decisions are
// those each filter makes on its own: a read blocks a later send, and a
// server's limit counts its calls.
func TestSharedDecisionsOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	var rt roundTrips
	c.AddHook(&rt)
	b := state.NewForTest(c, "p:", "r1")

	rl, err := ratelimit.New(json.RawMessage(`{"default_rpm": 60, "default_burst": 3, "burst": {"enabled": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := flow.New(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	host := func(string) extension.Host { return extension.Host{} }
	p, err := pipeline.Build(state.WithBackend(context.Background(), b), nil, host, []extension.Extension{rl, fl}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	call := func(server, tool string) error {
		_, err := p.Decide(ctx, &extension.CallRequest{ToolName: server + "__" + tool, ServerName: server, Tool: tool, Session: "s"})
		return err
	}

	if err := call("vault", "read_secret"); err != nil { // warms the script cache
		t.Fatal(err)
	}
	rt.n.Store(0)
	err = call("mail", "send_email")
	if d, ok := extension.AsDenial(err); !ok || d.Rule != "cross_server.read_then_send" {
		t.Fatalf("send after a read: %v", err)
	}
	if n := rt.n.Load(); n != 1 {
		t.Fatalf("%d Redis round trips for one call, want 1", n)
	}
	for _, tool := range []string{"read_more", "read_again"} {
		if err := call("vault", tool); err != nil {
			t.Fatal(err)
		}
	}
	err = call("vault", "read_fourth")
	if d, ok := extension.AsDenial(err); !ok || !strings.HasPrefix(d.Rule, "rate_limits.") {
		t.Fatalf("4th call to a server with a bucket of 3: %v", err)
	}
	// Redis forgets its scripts (a restart): the batch sends their text.
	c.ScriptFlush(ctx)
	rt.n.Store(0)
	if err := call("vault", "read_fifth"); err == nil || !strings.Contains(err.Error(), "rate_limits") {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	if n := rt.n.Load(); n != 2 {
		t.Fatalf("%d round trips after SCRIPT FLUSH, want 2 (by hash, then by text)", n)
	}
}
