package ratelimit

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// The contract: every behaviour test runs against each Store, the
// in-process one and the Redis one (a private redis-server per test), through the
// extension's own Provision.
var stores = []struct {
	name string
	ctx  func(t *testing.T) context.Context
}{
	{"memory", func(*testing.T) context.Context { return context.Background() }},
	{"redis", func(t *testing.T) context.Context {
		return state.WithBackend(context.Background(), redistest.Start(t).Backend(t, "r1"))
	}},
}

func forEachStore(t *testing.T, f func(t *testing.T, ctx context.Context)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { f(t, s.ctx(t)) })
	}
}

func newLimiter(t *testing.T, ctx context.Context, cfg string) (*Limiter, *time.Time) {
	t.Helper()
	e, err := New(json.RawMessage(cfg))
	if err != nil {
		t.Fatal(err)
	}
	l := e.(*Limiter)
	now := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return now }
	if err := l.Provision(ctx, extension.Host{Emit: func(context.Context, extension.Event) {}}); err != nil {
		t.Fatal(err)
	}
	return l, &now
}

func call(l *Limiter, server string) error {
	return l.check(context.Background(), &extension.CallRequest{ServerName: server, Tool: "t"})
}

func TestRatePerServer(t *testing.T) { forEachStore(t, testRatePerServer) }
func testRatePerServer(t *testing.T, ctx context.Context) {
	l, now := newLimiter(t, ctx, `{"default_rpm": 60, "default_burst": 2, "per_server": {"slow": {"calls_per_minute": 6, "burst": 1}}, "burst": {"enabled": false}}`)
	for i := range 2 {
		if err := call(l, "fast"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	err := call(l, "fast")
	d, ok := extension.AsDenial(err)
	if !ok || d.Code != extension.CodeResourceExhausted || !strings.Contains(d.Reason, "retry after 1.0 s") {
		t.Fatalf("third call: %v", err)
	}
	*now = now.Add(time.Second)
	if err := call(l, "fast"); err != nil {
		t.Fatalf("after a second: %v", err)
	}
	call(l, "slow")
	if d, _ := extension.AsDenial(call(l, "slow")); d == nil || !strings.Contains(d.Reason, "retry after 10.0 s") {
		t.Fatalf("slow server: %v", d)
	}
}

func TestBurstDetector(t *testing.T) { forEachStore(t, testBurstDetector) }
func testBurstDetector(t *testing.T, ctx context.Context) {
	l, now := newLimiter(t, ctx, `{"burst": {"max_calls": 3, "window": "5s"}}`)
	for range 3 {
		if err := call(l, "s"); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(time.Second)
	}
	d, ok := extension.AsDenial(call(l, "s"))
	if !ok || d.Rule != "rate_limits.burst" || !strings.Contains(d.Reason, "retry after 2.0 s") {
		t.Fatalf("4th call in window: %v", d)
	}
	if call(l, "other") != nil {
		t.Fatal("burst on one server limited another")
	}
	*now = now.Add(2 * time.Second)
	if err := call(l, "s"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestConcurrentCallsCannotSlipPast(t *testing.T) {
	forEachStore(t, testConcurrentCallsCannotSlipPast)
}
func testConcurrentCallsCannotSlipPast(t *testing.T, ctx context.Context) {
	l, _ := newLimiter(t, ctx, `{"burst": {"max_calls": 5, "window": "1m"}}`)
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if call(l, "s") == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d calls admitted, want 5", ok.Load())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []string{`{"rpm": 5}`, `{"default_rpm": -1}`, `{"per_server": {"x": {"calls_per_minute": 0}}}`, `{"burst": {"window": "soon"}}`, `{"burst": {"max_calls": -2}}`} {
		if _, err := New(json.RawMessage(c)); err == nil {
			t.Errorf("%s accepted", c)
		}
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }

// Each principal has its own budget: one caller using up a server's rate
// or burst does not refuse another's calls; idle entries are dropped when
// many callers have come and gone.
func TestLimitsPerPrincipal(t *testing.T) { forEachStore(t, testLimitsPerPrincipal) }
func testLimitsPerPrincipal(t *testing.T, ctx context.Context) {
	l, now := newLimiter(t, ctx, `{"default_rpm": 6, "default_burst": 1, "burst": {"max_calls": 2, "window": "5s"}}`)
	as := func(who string) error {
		return l.check(context.Background(), &extension.CallRequest{ServerName: "s", Tool: "t", Principal: who})
	}
	if err := as("alice"); err != nil {
		t.Fatal(err)
	}
	if err := as("alice"); err == nil {
		t.Fatal("alice's second call within the rate was admitted")
	}
	if err := as("bob"); err != nil {
		t.Fatalf("bob refused because of alice's calls: %v", err)
	}
	if err := as(""); err != nil {
		t.Fatalf("an unauthenticated call refused because of alice's: %v", err)
	}
	m, ok := l.store.(*memoryStore)
	if !ok {
		return // Redis expires idle keys by itself (PX on every key)
	}
	for i := range maxKeys + 10 {
		_ = as(string(rune('a'+i%26)) + strings.Repeat("x", i/26))
	}
	*now = now.Add(time.Hour)
	_ = as("late")
	if n := len(m.buckets); n > maxKeys/2 {
		t.Fatalf("%d buckets kept after every caller went idle", n)
	}
}
