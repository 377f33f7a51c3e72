package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/upstream/fakeserver"
)

// The test binary doubles as the fake stdio server.
const envBeFake = "TOOLGATE_UPSTREAM_TEST_FAKESERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envBeFake) == "1" {
		fakeserver.Main()
	}
	os.Exit(m.Run())
}

const markerVar = "TOOLGATE_UPSTREAM_TEST_MARKER"

func newMarker(t *testing.T) string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// procConfig is a stdio server running this test binary as the fake server.
func procConfig(name, marker string, env map[string]string) *config.Server {
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	e := map[string]string{envBeFake: "1", markerVar: marker, "GORACE": "atexit_sleep_ms=0"}
	if testing.CoverMode() != "" {
		// A covered child without GOCOVERDIR warns on stderr as it exits,
		// and that line would stand in for the exit cause tests look for.
		e["GOCOVERDIR"] = os.TempDir()
	}
	for k, v := range env {
		e[k] = v
	}
	return &config.Server{Name: name, Command: os.Args[0], Env: e, Transport: config.TransportStdio}
}

// markedPIDs lists live, non-zombie processes whose environment holds the
// marker.
func markedPIDs(t *testing.T, marker string) []int {
	t.Helper()
	want := []byte(markerVar + "=" + marker)
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, want) }) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// children lists this process's child processes (zombies included: a
// child that is not reaped is a leak too).
func children(t *testing.T) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	var out []int
	for _, e := range ents {
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) > 1 && f[1] == me {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func callText(t *testing.T, s *Server, tool string) string {
	t.Helper()
	res, err := s.CallTool(context.Background(), tool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// logSink collects log records.
type logSink struct {
	mu   sync.Mutex
	recs []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logSink) WithAttrs(as []slog.Attr) slog.Handler { return &prefixed{l, as} }
func (l *logSink) WithGroup(string) slog.Handler         { return l }
func (l *logSink) has(subs ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(r, s)
		}
		if ok {
			return true
		}
	}
	return false
}

type prefixed struct {
	l  *logSink
	as []slog.Attr
}

func (p *prefixed) Enabled(context.Context, slog.Level) bool { return true }
func (p *prefixed) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(p.as...)
	return p.l.Handle(ctx, r)
}
func (p *prefixed) WithAttrs(as []slog.Attr) slog.Handler {
	return &prefixed{p.l, append(slices.Clone(p.as), as...)}
}
func (p *prefixed) WithGroup(string) slog.Handler { return p }

func TestProcessStopEndsGroupAndReaps(t *testing.T) {
	marker := newMarker(t)
	logs := &logSink{}
	m := NewManager(Options{Logger: slog.New(logs)})
	defer m.Close()
	s, _ := m.Add(procConfig("proc", marker, nil))
	pid, _ := strconv.Atoi(callText(t, s, "pid"))
	grandchild, _ := strconv.Atoi(callText(t, s, "spawn"))
	if st := s.Status(); st.PID != pid || st.State != StateIdle {
		t.Fatalf("status %+v, want idle with pid %d", st, pid)
	}
	// The grandchild may still be between fork and exec when spawn
	// answers; wait (bounded) until /proc shows it with the marker.
	if !waitUntil(5*time.Second, func() bool {
		got := markedPIDs(t, marker)
		return slices.Contains(got, pid) && slices.Contains(got, grandchild)
	}) {
		t.Fatalf("marked processes %v, want the server %d and its grandchild %d", markedPIDs(t, marker), pid, grandchild)
	}
	s.Stop()
	// SIGKILL is delivered asynchronously: allow the grandchild a moment
	// to die (a bound, not a timing assertion).
	if !waitUntil(5*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("processes left after Stop: %v", markedPIDs(t, marker))
	}
	if c := children(t); len(c) != 0 {
		t.Fatalf("unreaped children after Stop: %v", c)
	}
	if st := s.Status(); st.State != StateStopped || st.LastError != "" {
		t.Fatalf("after Stop: %+v", st)
	}
	// The child's stderr reached the log, with the server's name.
	if !waitUntil(5*time.Second, func() bool { return logs.has("upstream stderr", "line=fakeserver: ready", "server=proc") }) {
		t.Fatalf("no stderr line with the server's name in the log: %v", logs.recs)
	}
}

func TestProcessStartFailureNamesServerAndCause(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("broken", newMarker(t), map[string]string{fakeserver.EnvFail: "start"}))
	_, err := s.CallTool(context.Background(), "echo", nil)
	if err == nil {
		t.Fatal("a server that exits at start answered")
	}
	for _, want := range []string{`server "broken"`, "exit status 2", "refusing to start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error %q does not mention %q", err, want)
		}
	}
	if st := s.Status(); st.State != StateFailed || st.LastError == "" {
		t.Fatalf("status %+v, want failed with the error", st)
	}
	if c := children(t); len(c) != 0 {
		t.Fatalf("unreaped children: %v", c)
	}
}

func TestProcessCrashInFlight(t *testing.T) {
	marker := newMarker(t)
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("crashy", marker, nil))
	ctx := context.Background()
	pid1 := callText(t, s, "pid")
	_, err := s.CallTool(ctx, "crash", nil)
	if err == nil || !strings.Contains(err.Error(), `server "crashy"`) {
		t.Fatalf("call in flight when the server crashed: %v, want an error naming it", err)
	}
	if st := s.Status(); st.State != StateFailed || !strings.Contains(st.LastError, "exit status 3") && !strings.Contains(st.LastError, "closed") {
		t.Fatalf("after the crash: %+v", st)
	}
	pid2 := callText(t, s, "pid")
	if pid1 == pid2 {
		t.Fatal("the server was not restarted")
	}
	if st := s.Status(); st.Restarts != 1 || st.State != StateIdle {
		t.Fatalf("after restart: %+v", st)
	}
}

// TestProcessSoak runs start/call/idle-stop cycles on several real child
// processes and then checks that no process and no goroutine is left.
func TestProcessSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const servers, cycles = 4, 40
	marker := newMarker(t)
	base := runtime.NumGoroutine()
	m := NewManager(Options{})
	var wg sync.WaitGroup
	errs := make(chan error, servers)
	for i := range servers {
		cfg := procConfig(fmt.Sprintf("soak%d", i), marker, nil)
		idle := 0.005
		cfg.IdleTimeout = &idle
		s, _ := m.Add(cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range cycles {
				res, err := s.CallTool(context.Background(), "echo", map[string]any{"message": strconv.Itoa(c)})
				if err != nil || res.IsError {
					errs <- fmt.Errorf("%s cycle %d: %v", s.Name(), c, err)
					return
				}
				if !waitUntil(10*time.Second, func() bool { return s.Status().State == StateStopped }) {
					errs <- fmt.Errorf("%s cycle %d: not stopped after its idle timeout: %+v", s.Name(), c, s.Status())
					return
				}
			}
			if st := s.Status(); st.Starts != cycles {
				errs <- fmt.Errorf("%s: %d starts, want %d", s.Name(), st.Starts, cycles)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m.Close()
	if !waitUntil(5*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("processes left: %v", markedPIDs(t, marker))
	}
	if c := children(t); len(c) != 0 {
		t.Fatalf("unreaped children: %v", c)
	}
	if !waitUntil(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after\n%s", base, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}
