package ratelimit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// Two replicas on one Redis share one budget: calls spread over both are
// admitted exactly up to the limit, as on one replica.
func TestReplicasShareOneLimit(t *testing.T) {
	a, b := redistest.Shared(t)
	cfg := `{"default_rpm": 60, "default_burst": 10, "burst": {"enabled": false}}`
	la, _ := newLimiter(t, state.WithBackend(context.Background(), a), cfg)
	lb, _ := newLimiter(t, state.WithBackend(context.Background(), b), cfg)
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		l := la
		if i%2 == 1 {
			l = lb
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if call(l, "s") == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 {
		t.Fatalf("%d calls admitted across two replicas, want the one bucket's 10", ok.Load())
	}
}

// Redis unreachable: the call is refused (fail closed) with a reason that
// names the shared state store; when Redis is back the same limiter
// decides again, without a restart.
func TestRedisDownFailsClosedAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := newLimiter(t, state.WithBackend(context.Background(), srv.Backend(t, "r1")), `{"default_rpm": 600}`)
	if err := call(l, "s"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	err := call(l, "s")
	d, ok := extension.AsDenial(err)
	if !ok || d.Rule != "rate_limits.state_unavailable" || !strings.Contains(d.Reason, "(Redis) is unreachable") {
		t.Fatalf("call with Redis down: %v, want a state_unavailable denial naming Redis", err)
	}
	srv.Restart()
	if err := call(l, "s"); err != nil {
		t.Fatalf("call after Redis came back: %v", err)
	}
}
