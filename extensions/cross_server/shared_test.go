package flow

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// A read on one replica taints the session on another: the send there is
// refused, also when the read and the sends race on different replicas.
func TestReadOnOneReplicaSendOnAnother(t *testing.T) {
	a, b := redistest.Shared(t)
	fa, _, _ := newFlowCtx(t, state.WithBackend(context.Background(), a), `{}`)
	fb, _, _ := newFlowCtx(t, state.WithBackend(context.Background(), b), `{}`)
	if err := do(fa, "s1", "vault", "read_secret"); err != nil {
		t.Fatal(err)
	}
	d, ok := extension.AsDenial(do(fb, "s1", "mail", "send_email"))
	if !ok || d.Rule != "cross_server.read_then_send" {
		t.Fatalf("send on replica b after a read on replica a: %v, want read_then_send", d)
	}
	if err := do(fb, "s2", "mail", "send_email"); err != nil {
		t.Fatalf("another session was tainted: %v", err)
	}

	for i := range 10 {
		sess := "race" + string(rune('a'+i))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); do(fa, sess, "vault", "read_secret") }()
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); do(fb, sess, "mail", "send_data") }()
		}
		wg.Wait()
		if do(fb, sess, "mail", "send_data") == nil {
			t.Fatal("send admitted on replica b after the read on a completed")
		}
	}
}

// Redis unreachable: every call is refused with a reason naming the shared
// state store; once Redis is back the same Flow decides again.
func TestRedisDownFailsClosedAndRecovers(t *testing.T) {
	srv := redistest.Start(t)
	f, _, _ := newFlowCtx(t, state.WithBackend(context.Background(), srv.Backend(t, "r1")), `{}`)
	srv.Stop()
	d, ok := extension.AsDenial(do(f, "s", "vault", "read_secret"))
	if !ok || d.Rule != "cross_server.state_unavailable" || !strings.Contains(d.Reason, "(Redis) is unreachable") {
		t.Fatalf("call with Redis down: %v", d)
	}
	srv.Restart()
	if err := do(f, "s", "vault", "read_secret"); err != nil {
		t.Fatalf("after Redis came back: %v", err)
	}
	if do(f, "s", "mail", "send_email") == nil {
		t.Fatal("send admitted after a read recorded once Redis was back")
	}
}
