package e2e

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestCLICallRealServer calls a tool of the real npm server through the
// binary's `call` command: the filters run, the gate does not, and the
// decision is audited as the operator's.
func TestCLICallRealServer(t *testing.T) {
	t.Parallel()
	cfg := coreConfig(t, everythingOnly())
	state := t.TempDir()
	// Flags after the positional arguments, as with any Go CLI.
	out, err := exec.Command(binPath, "call", "everything__echo", `{"message": "from the shell"}`, "--config", cfg, "--state-dir", state).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "from the shell") {
		t.Fatalf("toolgate call: %v\n%s", err, out)
	}
	// The decision is in the audit log, by the operator.
	out, err = exec.Command(binPath, "calls", "--state-dir", state, "--json").Output()
	if err != nil || !strings.Contains(string(out), `"session":"operator"`) || !strings.Contains(string(out), `"operator":true`) {
		t.Fatalf("toolgate calls: %v\n%s", err, out)
	}
	// A refused argument shape: exit 2 before anything starts.
	cmd := exec.Command(binPath, "call", "--config", cfg, "--state-dir", state, "everything__echo", `"not an object"`)
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "JSON object") {
		t.Fatalf("bad arguments: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// TestCLIListenPortOnly serves on a port given alone, which means loopback.
func TestCLIListenPortOnly(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	g := startHTTP(t, coreConfig(t, everythingOnly()), "--listen", port)
	if want := "http://127.0.0.1:" + port + "/mcp"; g.URL != want {
		t.Fatalf("serving at %s, want %s", g.URL, want)
	}
	cs := connectHTTP(t, g.URL, "2025-11-25")
	if got := search(t, cs, "echo a message back", 1); len(got) != 1 || got[0] != "everything__echo" {
		t.Fatalf("search over the port-only listener = %v", got)
	}
}

// TestCLIRefusesNonLoopbackListen: the real binary exits 2 with the reason
// and the flag that overrides it.
func TestCLIRefusesNonLoopbackListen(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "serve", "--config", coreConfig(t, everythingOnly()), "--state-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "not a loopback address") || !strings.Contains(string(out), "--insecure-no-auth") || strings.Contains(string(out), "gateway ready") {
		t.Fatalf("exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}
