package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The lifecycle tests run a tiny Go MCP server (internal/upstream/
// fakeserver) instead of the npm servers: it starts in milliseconds, so a
// thousand start/stop cycles fit in a few seconds, and it records what
// reached it (starts, calls, notifications/cancelled) in a log file.

// fakeBin builds the fake server once, next to the toolgate binary.
func fakeBin(t *testing.T) string {
	return helperBinary(t, "fakeserver", "./internal/upstream/fakeserver/cmd/fakeserver")
}

// fakeEntry is a config entry for the fake server recording to logFile,
// with topic as a word in its tool descriptions.
func fakeEntry(t *testing.T, logFile, topic string, extra map[string]any) map[string]any {
	e := map[string]any{
		"command": fakeBin(t),
		"env":     map[string]any{"FAKESERVER_LOG": logFile, "FAKESERVER_TOPIC": topic},
	}
	for k, v := range extra {
		if k == "env" {
			for ek, ev := range v.(map[string]any) {
				e["env"].(map[string]any)[ek] = ev
			}
			continue
		}
		e[k] = v
	}
	return e
}

// fakeEvents reads a fake server's log: one "PID EVENT" line per event.
func fakeEvents(logFile string) []string {
	b, _ := os.ReadFile(logFile)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if _, ev, ok := strings.Cut(l, " "); ok {
			out = append(out, ev)
		}
	}
	return out
}

func countFake(logFile, ev string) int {
	n := 0
	for _, e := range fakeEvents(logFile) {
		if e == ev {
			n++
		}
	}
	return n
}

// lcServerStatus is the part of GET /status the tests read.
type lcServerStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	InFlight  int    `json:"in_flight"`
	PID       int    `json:"pid"`
	Starts    int    `json:"starts"`
	Restarts  int    `json:"restarts"`
	LastError string `json:"last_error"`
}

type lcStatus struct {
	Goroutines int              `json:"goroutines"`
	Servers    []lcServerStatus `json:"servers"`
}

func (g *gatewayProc) lifecycleStatus(t *testing.T) lcStatus {
	t.Helper()
	base := strings.TrimSuffix(g.URL, "/mcp")
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	defer resp.Body.Close()
	var st lcStatus
	if resp.StatusCode != 200 {
		t.Fatalf("GET /status: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	return st
}

func (st lcStatus) server(name string) lcServerStatus {
	for _, s := range st.Servers {
		if s.Name == name {
			return s
		}
	}
	return lcServerStatus{}
}

// TestLifecycleLazyStartFromCache: the first run with no cache starts a lazy
// server once to list its tools and stops it; the next run finds its tools
// from the catalogue cache without starting it, and the first call starts
// it.
func TestLifecycleLazyStartFromCache(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	log := filepath.Join(t.TempDir(), "fake.log")
	marker := newMarker(t)
	cfg := coreConfig(t, map[string]any{
		"lazyfake": withMarker(fakeEntry(t, log, "zebra", map[string]any{"lazy": true}), marker),
	})

	// First run: no cache.
	cs, _ := startStdio(t, cfg, "--state-dir", stateDir)
	if got := search(t, cs, "zebra echo message", 1); !slices.Equal(got, []string{"lazyfake__echo"}) {
		t.Fatalf("search = %v, want lazyfake__echo", got)
	}
	// Stopped after listing: no process of it is left. (Whether it got to
	// log its own exit depends on how fast it ends under load, so the
	// process table, not its log, is the evidence.)
	if !waitFor(10*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("first run: the lazy server still runs after listing: %v; events %v", markedPIDs(t, marker), fakeEvents(log))
	}
	if n := countFake(log, "start"); n != 1 {
		t.Fatalf("first run started the lazy server %d times, want 1", n)
	}
	cs.Close()
	if files, _ := filepath.Glob(filepath.Join(stateDir, "catalog", "*.json")); len(files) != 1 {
		t.Fatalf("catalogue cache files %v, want one", files)
	}

	// Second run: the cache answers; nothing starts until a call.
	cs, logs := startStdio(t, cfg, "--state-dir", stateDir)
	if got := search(t, cs, "zebra echo message", 1); !slices.Equal(got, []string{"lazyfake__echo"}) {
		t.Fatalf("second run: search = %v, want lazyfake__echo", got)
	}
	if n := countFake(log, "start"); n != 1 {
		t.Fatalf("second run started the lazy server before any call (%d starts)", n)
	}
	if !strings.Contains(logs.String(), "catalogue cache") {
		t.Errorf("no log line about the catalogue cache:\n%s", logs)
	}
	wantOK(t, "first call", callTool(t, cs, "lazyfake__echo", map[string]any{"message": "wake up"}), "echo: wake up")
	if n := countFake(log, "start"); n != 2 {
		t.Fatalf("the first call made %d starts in all, want 2", n)
	}
	noPanic(t, logs.String())
}

// TestLifecycleIdleStopStatusAndRestart: an idle server is stopped, GET
// /status and `toolgate status` say so, and the next call starts it again
// transparently.
func TestLifecycleIdleStopStatusAndRestart(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "fake.log")
	marker := newMarker(t)
	cfg := coreConfig(t, map[string]any{
		"idler": withMarker(fakeEntry(t, log, "yak", map[string]any{"idle_timeout": 0.05}), marker),
	})
	g := startHTTP(t, cfg)
	cs := connectHTTP(t, g.URL, "2025-11-25")
	if got := search(t, cs, "yak echo message", 1); !slices.Equal(got, []string{"idler__echo"}) {
		t.Fatalf("search = %v", got)
	}
	if !waitFor(10*time.Second, func() bool { return g.lifecycleStatus(t).server("idler").State == "stopped" }) {
		t.Fatalf("not stopped after its idle timeout: %+v", g.lifecycleStatus(t).server("idler"))
	}
	if !waitFor(10*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("stopped server's processes remain: %v", markedPIDs(t, marker))
	}
	wantOK(t, "call after idle stop", callTool(t, cs, "idler__echo", map[string]any{"message": "again"}), "echo: again")
	st := g.lifecycleStatus(t).server("idler")
	if st.Starts != 2 || st.Tools != len(fakeToolNames) || st.Restarts != 0 || st.LastError != "" {
		t.Fatalf("status after the restart: %+v", st)
	}

	// The CLI reads the same endpoint.
	var out, errb bytes.Buffer
	cmd := exec.Command(binPath, "status", "--addr", strings.TrimSuffix(g.URL, "/mcp"))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolgate status: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "idler") || !strings.Contains(out.String(), "STATE") || !strings.Contains(out.String(), "audit chain at seq") {
		t.Fatalf("toolgate status output:\n%s", out.String())
	}
	noPanic(t, g.Logs.String())
}

// fakeToolNames are the fake server's tools.
var fakeToolNames = []string{"crash", "echo", "pid", "sleep", "spawn"}

// TestLifecycleCrashRestartBackoff: a call in flight when its server dies
// gets an error naming the server; the next call restarts it; a server that
// then keeps failing to start is not restarted on every call, and the
// refusal says when the next attempt is.
func TestLifecycleCrashRestartBackoff(t *testing.T) {
	t.Parallel()
	okLog := filepath.Join(t.TempDir(), "ok.log")
	badLog := filepath.Join(t.TempDir(), "bad.log")
	cfg := coreConfig(t, map[string]any{
		"phoenix": fakeEntry(t, okLog, "firebird", nil),
		"doomed":  fakeEntry(t, badLog, "lemming", map[string]any{"env": map[string]any{"FAKESERVER_FAIL": "fail-after-first"}}),
	})
	// Stateful sessions: the gate remembers searches per session.
	g := startHTTP(t, cfg)
	cs := connectHTTP(t, g.URL, "2025-11-25")
	for _, q := range []string{"firebird crash", "firebird echo", "lemming crash", "lemming echo"} {
		search(t, cs, q, 2)
	}

	wantRefused(t, "call in flight when phoenix crashed", callTool(t, cs, "phoenix__crash", nil), `"phoenix"`)
	wantOK(t, "call after the crash", callTool(t, cs, "phoenix__echo", map[string]any{"message": "risen"}), "echo: risen")
	if st := g.lifecycleStatus(t).server("phoenix"); st.Restarts != 1 || st.State == "failed" {
		t.Fatalf("phoenix after restart: %+v", st)
	}

	// doomed crashes, then every start fails.
	wantRefused(t, "doomed crash", callTool(t, cs, "doomed__crash", nil), `"doomed"`)
	wantRefused(t, "first restart", callTool(t, cs, "doomed__echo", map[string]any{"message": "x"}), `"doomed"`, "refusing to start")
	for range 20 {
		wantRefused(t, "restart during backoff", callTool(t, cs, "doomed__echo", map[string]any{"message": "x"}), `"doomed"`, "not restarted before")
	}
	if n := countFake(badLog, "start"); n > 4 {
		t.Fatalf("doomed was started %d times for 22 calls; backoff should hold it to a few", n)
	}
	if st := g.lifecycleStatus(t).server("doomed"); st.State != "failed" || !strings.Contains(st.LastError, "refusing to start") {
		t.Fatalf("doomed status: %+v", st)
	}
	noPanic(t, g.Logs.String())
}

// TestLifecycleCancellationReachesUpstream proves the chain: the client
// cancels its call_tool, its SDK sends notifications/cancelled to toolgate,
// toolgate's MCP server cancels the handler's context, and toolgate's client
// sends notifications/cancelled to the upstream, whose handler stops. A
// per-server call_timeout does the same from the gateway's side.
func TestLifecycleCancellationReachesUpstream(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "slow.log")
	tlog := filepath.Join(t.TempDir(), "timeout.log")
	cfg := coreConfig(t, map[string]any{
		"slow":  fakeEntry(t, log, "sloth", nil),
		"timed": fakeEntry(t, tlog, "tortoise", map[string]any{"call_timeout": 0.3}),
	})
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			var cs *mcp.ClientSession
			var logs *syncBuffer
			if transport == "stdio" {
				cs, logs = startStdio(t, cfg)
			} else {
				g := startHTTP(t, cfg)
				cs, logs = connectHTTP(t, g.URL, "2025-11-25"), g.Logs
			}
			before := countFake(log, "notify notifications/cancelled")
			search(t, cs, "sloth sleep", 1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
					"tool_name": "slow__sleep", "arguments": map[string]any{"ms": 60_000},
				}})
				done <- err
			}()
			// In flight: the upstream has more sleeps begun than cancelled.
			if !waitFor(20*time.Second, func() bool { return countFake(log, "call sleep") > countFake(log, "cancelled sleep") }) {
				t.Fatal("the call never reached the upstream")
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the cancelled call returned no error")
			}
			if !waitFor(20*time.Second, func() bool {
				return countFake(log, "notify notifications/cancelled") > before && countFake(log, "cancelled sleep") == countFake(log, "call sleep")
			}) {
				t.Fatalf("the upstream never saw the cancellation; its events: %v", fakeEvents(log))
			}

			// The gateway's own deadline.
			tbefore := countFake(tlog, "notify notifications/cancelled")
			search(t, cs, "tortoise sleep", 1)
			wantRefused(t, "call past call_timeout", callTool(t, cs, "timed__sleep", map[string]any{"ms": 60_000}), `"timed"`, "within 300ms")
			if !waitFor(20*time.Second, func() bool { return countFake(tlog, "notify notifications/cancelled") > tbefore }) {
				t.Fatalf("the upstream never saw the timeout's cancellation; its events: %v", fakeEvents(tlog))
			}
			noPanic(t, logs.String())
		})
	}
}

// TestLifecycleSoak runs 1,000 start/call/idle-stop cycles across several
// servers through the real gateway, then checks that no server process is
// left and that the gateway's goroutines did not grow.
func TestLifecycleSoak(t *testing.T) {
	t.Parallel()
	const servers, cycles = 8, 125 // 1,000 cycles
	marker := newMarker(t)
	dir := t.TempDir()
	topics := []string{"alpha", "bravo", "charlie", "delta", "india", "foxtrot", "golf", "hotel"}
	entries := map[string]any{}
	for i := range servers {
		entries[fmt.Sprintf("soak%d", i)] = withMarker(fakeEntry(t, filepath.Join(dir, fmt.Sprintf("%d.log", i)), topics[i], map[string]any{"idle_timeout": 0.02}), marker)
	}
	g := startHTTP(t, coreConfig(t, entries))

	sessions := make([]*mcp.ClientSession, servers)
	for i := range servers {
		sessions[i] = connectHTTP(t, g.URL, "2025-11-25")
		name := fmt.Sprintf("soak%d__echo", i)
		if got := search(t, sessions[i], topics[i]+" echo message", 1); !slices.Equal(got, []string{name}) {
			t.Fatalf("search for %s = %v", name, got)
		}
	}
	stopped := func(name string) bool {
		// Polled every few milliseconds: waitFor's 50 ms would dominate
		// a cycle.
		deadline := time.Now().Add(20 * time.Second)
		for g.lifecycleStatus(t).server(name).State != "stopped" {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(3 * time.Millisecond)
		}
		return true
	}
	cycle := func(i, c int) error {
		name := fmt.Sprintf("soak%d", i)
		res, err := sessions[i].CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
			"tool_name": name + "__echo", "arguments": map[string]any{"message": fmt.Sprint(c)},
		}})
		if err != nil || res.IsError {
			return fmt.Errorf("%s cycle %d: %v %s", name, c, err, text(res))
		}
		if !stopped(name) {
			return fmt.Errorf("%s cycle %d: not stopped after its idle timeout: %+v", name, c, g.lifecycleStatus(t).server(name))
		}
		return nil
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		errs := make(chan error, servers)
		for i := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := from; c < to; c++ {
					if err := cycle(i, c); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// A first round warms up every pool and session; its goroutine count
	// is the baseline.
	run(0, 1)
	base := g.lifecycleStatus(t).Goroutines
	run(1, cycles)

	st := g.lifecycleStatus(t)
	for i := range servers {
		s := st.server(fmt.Sprintf("soak%d", i))
		// One start to list at startup, then one per cycle.
		if s.Starts != cycles+1 || s.State != "stopped" || s.Restarts != 0 {
			t.Errorf("%s: %+v, want %d starts and stopped", s.Name, s, cycles+1)
		}
	}
	if !waitFor(10*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("server processes left after the soak: %v", markedPIDs(t, marker))
	}
	var now int
	if !waitFor(10*time.Second, func() bool { now = g.lifecycleStatus(t).Goroutines; return now <= base+2 }) {
		t.Fatalf("gateway goroutines grew from %d to %d over %d cycles", base, now, servers*cycles)
	}
	t.Logf("%d cycles; gateway goroutines %d after warm-up, %d at the end", servers*cycles, base, now)
	noPanic(t, g.Logs.String())
}
