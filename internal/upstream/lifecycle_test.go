package upstream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/upstream/fakeserver"
)

// fake runs in-process fake servers behind a Manager: every start of a
// server connects a fresh fakeserver over in-memory pipes.
type fake struct {
	mu     sync.Mutex
	events []string
	starts atomic.Int32
	// refuse, while set, makes starts fail (the server closes at once).
	refuse atomic.Bool
}

func (f *fake) record(ev string) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
}

func (f *fake) count(ev string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.events {
		if e == ev {
			n++
		}
	}
	return n
}

func (f *fake) transport(cfg *config.Server) mcp.Transport {
	f.starts.Add(1)
	ct, st := mcp.NewInMemoryTransports()
	if f.refuse.Load() {
		// The server end closes at once: the handshake fails.
		if c, err := st.Connect(context.Background()); err == nil {
			c.Close()
		}
		return ct
	}
	kt := &killable{Transport: st}
	srv := fakeserver.New(fakeserver.Options{
		Record: f.record,
		// As a process dies: the pipe closes under the call in flight
		// (ServerSession.Close would wait for that call to finish).
		Crash: func(*mcp.ServerSession) { go kt.conn.Close() },
	})
	if _, err := srv.Connect(context.Background(), kt, nil); err != nil {
		panic(err)
	}
	return ct
}

// killable keeps the server's end of the connection, to close it abruptly.
type killable struct {
	mcp.Transport
	conn mcp.Connection
}

func (k *killable) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := k.Transport.Connect(ctx)
	k.conn = c
	return c, err
}

// newFake returns a manager with one fake server "s" configured by cfg.
func newFake(t *testing.T, cfg config.Server) (*Manager, *Server, *fake) {
	t.Helper()
	f := &fake{}
	m := NewManager(Options{Transport: f.transport, ConnectTimeout: 5 * time.Second})
	cfg.Name, cfg.Command, cfg.Transport = "s", "unused", config.TransportStdio
	s, err := m.Add(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, s, f
}

func secs(f float64) *float64 { return &f }

func echo(t *testing.T, s *Server, msg string) {
	t.Helper()
	res, err := s.CallTool(context.Background(), "echo", map[string]any{"message": msg})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "echo: "+msg {
		t.Fatalf("echo = %q", got)
	}
}

func wantState(t *testing.T, s *Server, want State) Status {
	t.Helper()
	st := s.Status()
	if st.State != want {
		t.Fatalf("state %s, want %s (%+v)", st.State, want, st)
	}
	return st
}

func TestLifecycleIdleStopAndTransparentRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{IdleTimeout: secs(60)})
		defer m.Close()
		wantState(t, s, StateStopped)
		echo(t, s, "one")
		synctest.Wait()
		wantState(t, s, StateIdle)

		time.Sleep(59 * time.Second)
		synctest.Wait()
		wantState(t, s, StateIdle) // not yet

		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := wantState(t, s, StateStopped)
		if st.LastError != "" || st.Starts != 1 {
			t.Fatalf("after idle stop: %+v", st)
		}
		// The next call starts it again; the caller just sees a result.
		echo(t, s, "two")
		if st := s.Status(); st.Starts != 2 || st.Restarts != 0 || f.starts.Load() != 2 {
			t.Fatalf("after restart: %+v (transport starts %d)", st, f.starts.Load())
		}
	})
}

// A call during the idle window moves the stop to idle_timeout after
// that call: the timer set for the first call finds a later deadline when
// it fires and waits for the rest.
func TestLifecycleIdleStopMovesWithEachCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := newFake(t, config.Server{IdleTimeout: secs(60)})
		defer m.Close()
		echo(t, s, "one")
		time.Sleep(40 * time.Second)
		echo(t, s, "two")
		time.Sleep(21 * time.Second) // past the first call's deadline
		synctest.Wait()
		if st := wantState(t, s, StateIdle); st.Starts != 1 {
			t.Fatalf("restarted: %+v", st)
		}
		time.Sleep(38 * time.Second) // 99 s: 59 s after the second call
		synctest.Wait()
		wantState(t, s, StateIdle)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantState(t, s, StateStopped)
		echo(t, s, "three") // and the timer serves the next connection too
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if st := wantState(t, s, StateStopped); st.Starts != 2 {
			t.Fatalf("after the second idle stop: %+v", st)
		}
	})
}

func TestLifecycleIdleZeroNeverStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := newFake(t, config.Server{IdleTimeout: secs(0)})
		defer m.Close()
		echo(t, s, "x")
		time.Sleep(1000 * time.Hour)
		synctest.Wait()
		wantState(t, s, StateIdle)
	})
}

func TestLifecycleIdleNeverCutsACallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{IdleTimeout: secs(1)})
		defer m.Close()
		done := make(chan error)
		go func() {
			// Ten idle timeouts long.
			_, err := s.CallTool(context.Background(), "sleep", map[string]any{"ms": 10_000})
			done <- err
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if st := wantState(t, s, StateRunning); st.InFlight != 1 {
			t.Fatalf("in flight %d, want 1", st.InFlight)
		}
		if err := <-done; err != nil {
			t.Fatalf("the long call was cut: %v", err)
		}
		if f.count("cancelled sleep") != 0 {
			t.Fatal("the upstream saw its call cancelled")
		}
		synctest.Wait()
		wantState(t, s, StateIdle)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantState(t, s, StateStopped)
	})
}

func TestLifecycleConcurrentCallsStartOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{})
		defer m.Close()
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				echo(t, s, strings.Repeat("x", i))
			}()
		}
		wg.Wait()
		if n := f.starts.Load(); n != 1 {
			t.Fatalf("20 concurrent calls to a stopped server started it %d times, want 1", n)
		}
	})
}

func TestLifecycleCrashInFlightThenRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{})
		defer m.Close()
		echo(t, s, "before")
		_, err := s.CallTool(context.Background(), "crash", nil)
		if err == nil || !strings.Contains(err.Error(), `server "s"`) || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("call in flight when the server died: err %v, want one naming the server", err)
		}
		synctest.Wait()
		st := wantState(t, s, StateFailed)
		if st.LastError == "" || !st.NextAttempt.IsZero() {
			t.Fatalf("after one crash: %+v (want an error and no backoff)", st)
		}
		echo(t, s, "after")
		if st := s.Status(); st.Starts != 2 || st.Restarts != 1 || st.ConsecutiveFailures != 0 || f.starts.Load() != 2 {
			t.Fatalf("after restart: %+v", st)
		}
	})
}

func TestLifecycleBackoffOnCrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{})
		defer m.Close()
		f.refuse.Store(true)
		// A client hammering a broken server for a minute of fake time.
		var backoffErr *BackoffError
		refused := 0
		for range 600 {
			_, err := s.CallTool(context.Background(), "echo", map[string]any{"message": "x"})
			if err == nil {
				t.Fatal("a call to a server that cannot start succeeded")
			}
			if errors.As(err, &backoffErr) {
				refused++
				msg := err.Error()
				if !strings.Contains(msg, `server "s"`) || !strings.Contains(msg, "not restarted before") {
					t.Fatalf("backoff error %q does not say when the next attempt is", msg)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		// 0, 0, 0.5, 1, 2, 4, 8, 16, 30 s... about 9 attempts in 60 s,
		// not 600.
		if n := f.starts.Load(); n > 12 || n < 5 {
			t.Fatalf("%d start attempts in a minute of crash loop; want a handful", n)
		}
		if refused < 500 {
			t.Fatalf("only %d of 600 calls were refused by the backoff", refused)
		}
		st := wantState(t, s, StateFailed)
		if st.NextAttempt.IsZero() || st.ConsecutiveFailures < 5 {
			t.Fatalf("status during backoff: %+v", st)
		}
		// Once it works again, the next due attempt succeeds and the
		// failure count is cleared.
		f.refuse.Store(false)
		time.Sleep(time.Until(st.NextAttempt))
		echo(t, s, "healed")
		if st := s.Status(); st.ConsecutiveFailures != 0 || st.State != StateIdle || st.Restarts != 1 {
			t.Fatalf("after healing: %+v", st)
		}
	})
}

func TestBackoffSchedule(t *testing.T) {
	want := []time.Duration{0, 0, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := backoff(n); got != w {
			t.Errorf("backoff(%d) = %v, want %v", n, got, w)
		}
	}
}

func TestLifecycleCallTimeoutCancelsUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{CallTimeout: secs(2)})
		defer m.Close()
		_, err := s.CallTool(context.Background(), "sleep", map[string]any{"ms": 60_000})
		if err == nil || !strings.Contains(err.Error(), "within 2s") || !strings.Contains(err.Error(), `server "s"`) {
			t.Fatalf("err %v, want a timeout naming the server and the limit", err)
		}
		synctest.Wait()
		if f.count("notify notifications/cancelled") != 1 || f.count("cancelled sleep") != 1 {
			t.Fatalf("upstream events %v: want notifications/cancelled received and the handler cancelled", f.events)
		}
		// The connection is still good.
		echo(t, s, "still there")
	})
}

func TestLifecycleCallerCancelReachesUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, f := newFake(t, config.Server{})
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := s.CallTool(ctx, "sleep", map[string]any{"ms": 60_000})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		synctest.Wait()
		if f.count("notify notifications/cancelled") != 1 || f.count("cancelled sleep") != 1 {
			t.Fatalf("upstream events %v: want notifications/cancelled received and the handler cancelled", f.events)
		}
		// A cancelled call is not a failure of the server.
		if st := s.Status(); st.State != StateIdle || st.ConsecutiveFailures != 0 {
			t.Fatalf("after a cancelled call: %+v", st)
		}
	})
}

func TestLifecycleRemovedServerRefusesCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := newFake(t, config.Server{})
		echo(t, s, "x")
		m.Remove("s")
		if _, err := s.CallTool(context.Background(), "echo", nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("call after Remove: %v, want ErrClosed", err)
		}
		m.Close()
	})
}
