package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamDiesMidCall kills server-everything while a call to it is in
// flight: the call must come back as an isError result naming the server,
// and the next call must restart the server and work.
func TestUpstreamDiesMidCall(t *testing.T) {
	t.Parallel()
	t.Run("whole group killed", func(t *testing.T) { t.Parallel(); upstreamDiesMidCall(t, false) })
	// A background child of the server that survives it and keeps its
	// stderr open delays the end of the dead session by the transport's
	// wait delay; the next call must not be sent into the dead session.
	t.Run("stderr held open", func(t *testing.T) { t.Parallel(); upstreamDiesMidCall(t, true) })
}

func upstreamDiesMidCall(t *testing.T, holdStderr bool) {
	marker := newMarker(t)
	// The server's stdin is teed to a file, so the test knows the request
	// reached the server before it kills it.
	wire := filepath.Join(t.TempDir(), "wire.log")
	script := `tee -a "$0" | exec "$1"`
	if holdStderr {
		script = `sleep 120 </dev/null >/dev/null & ` + script
	}
	entry := map[string]any{
		"command": "sh",
		"args":    []string{"-c", script, wire, npmServer("everything")},
	}
	cs, logs := startStdio(t, coreConfig(t, map[string]any{"everything": withMarker(entry, marker)}))
	t.Cleanup(func() {
		for _, pid := range markedPIDs(t, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	if got := search(t, cs, "long running operation", 3); !slices.Contains(got, "everything__trigger-long-running-operation") {
		t.Fatalf("search = %v, want everything__trigger-long-running-operation", got)
	}
	if got := search(t, cs, "echo a message back", 1); !slices.Equal(got, []string{"everything__echo"}) {
		t.Fatalf("search = %v, want everything__echo", got)
	}
	before := markedPIDs(t, marker)
	if len(before) == 0 {
		t.Fatal("cannot find server-everything's processes")
	}

	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
			"tool_name": "everything__trigger-long-running-operation",
			// Long enough that it cannot finish before the kill; the
			// gateway's call timeout (60s) is longer still.
			"arguments": map[string]any{"duration": 45, "steps": 3},
		}})
		done <- result{res, err}
	}()
	if !waitFor(30*time.Second, func() bool {
		b, _ := os.ReadFile(wire)
		return strings.Contains(string(b), "trigger-long-running-operation")
	}) {
		t.Fatal("the call never reached server-everything")
	}
	for _, pid := range before {
		if holdStderr && isSleep(pid) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the in-flight call did not return after its server was killed")
	}
	if r.err != nil {
		t.Fatalf("in-flight call: protocol error %v, want an isError result", r.err)
	}
	wantRefused(t, "in-flight call", r.res, `"everything"`)
	if strings.Contains(text(r.res), "completed") {
		t.Fatalf("the long-running call completed although its server was killed: %s", text(r.res))
	}

	// The next call restarts the server; the gate still remembers the search.
	wantOK(t, "echo after the crash", callTool(t, cs, "everything__echo", map[string]any{"message": "revived"}), "Echo: revived")
	after := slices.DeleteFunc(markedPIDs(t, marker), isSleep)
	if len(after) == 0 || slices.ContainsFunc(after, func(p int) bool { return slices.Contains(before, p) }) {
		t.Fatalf("server processes before the kill %v, after the restart %v: want new ones", before, after)
	}
	if !strings.Contains(logs.String(), "upstream disconnected") {
		t.Errorf("no log line about the upstream disconnecting:\n%s", logs)
	}
	noPanic(t, logs.String())
}

// isSleep reports whether pid runs sleep.
func isSleep(pid int) bool {
	b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
	return strings.HasPrefix(filepath.Base(string(b)), "sleep\x00")
}

// TestShutdownLeavesNoChildren closes the client's end of stdio and checks
// that toolgate exits by itself, cleanly, and that nothing it started
// survives, including a grandchild a server left in the background.
func TestShutdownLeavesNoChildren(t *testing.T) {
	t.Parallel()
	marker := newMarker(t)
	servers := defaultServers(t)
	for name, e := range servers {
		servers[name] = withMarker(e.(map[string]any), marker)
	}
	// A server that leaves a background grandchild in its process group.
	servers["forker"] = withMarker(map[string]any{
		"command": "sh",
		"args":    []string{"-c", `sleep 600 </dev/null >/dev/null 2>&1 & exec "$0"`, npmServer("everything")},
	}, marker)
	cfg := coreConfig(t, servers)

	logs := &syncBuffer{}
	cmd := exec.Command(binPath, "serve", "--config", cfg, "--state-dir", t.TempDir())
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		// Whatever happens, leave nothing behind.
		for _, pid := range markedPIDs(t, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("toolgate logs:\n%s", logs)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	// A long TerminateDuration: toolgate must exit because stdin closed,
	// not because it was signalled.
	cs, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd, TerminateDuration: 60 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	waitReady(t, logs)
	// Use every server, so each has a live process.
	if got := search(t, cs, "echo a message back", 1); !slices.Equal(got, []string{"everything__echo"}) {
		t.Fatalf("search = %v", got)
	}
	wantOK(t, "echo", callTool(t, cs, "everything__echo", map[string]any{"message": "bye"}), "bye")
	running := markedPIDs(t, marker)
	// everything, filesystem, memory, forker's node and its sleep.
	if len(running) < 5 {
		t.Fatalf("want at least 5 marked processes before shutdown, found %v", running)
	}

	if err := cs.Close(); err != nil {
		t.Fatalf("toolgate did not exit cleanly after stdin closed: %v\n%s", err, logs)
	}
	if st := cmd.ProcessState; st == nil || !st.Exited() || st.ExitCode() != 0 {
		t.Fatalf("toolgate process state %v, want a clean exit 0", cmd.ProcessState)
	}
	if left := markedPIDs(t, marker); len(left) != 0 {
		var desc []string
		for _, pid := range left {
			b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
			desc = append(desc, itoa(pid)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
		t.Fatalf("processes left after toolgate exited:\n%s", strings.Join(desc, "\n"))
	}
	noPanic(t, logs.String())
}
