package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/egress"
)

func withEgress(cfg *config.Server, mode, fallback string) *config.Server {
	cfg.Egress = &config.Egress{Mode: mode, Fallback: fallback}
	return cfg
}

// environ returns a process's environment variable, as the process sees it.
func environ(t *testing.T, pid int, name string) (string, bool) {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func netns(t *testing.T, pid string) string {
	t.Helper()
	l, err := os.Readlink("/proc/" + pid + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEgressEnforcedServerIsTheProcess: in enforce mode the server runs in
// a network namespace of its own, yet it is the process the manager
// started (the helper execs it in place), so its pid, process group and
// reaping are those of any stdio server.
func TestEgressEnforcedServerIsTheProcess(t *testing.T) {
	if err := egress.Probe(); err != nil {
		t.Skipf("enforce mode cannot run here: %v", err)
	}
	marker := newMarker(t)
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(withEgress(procConfig("jail", marker, nil), egress.ModeEnforce, ""))
	pid, _ := strconv.Atoi(callText(t, s, "pid"))
	st := s.Status()
	if st.PID != pid || st.Egress == nil || st.Egress.Mode != egress.ModeEnforce {
		t.Fatalf("status %+v (egress %+v), want pid %d in enforce mode", st, st.Egress, pid)
	}
	if netns(t, strconv.Itoa(pid)) == netns(t, "self") {
		t.Fatal("the server shares the gateway's network namespace")
	}
	proxy, ok := environ(t, pid, "HTTP_PROXY")
	if !ok || !strings.HasPrefix(proxy, "http://127.0.0.1:") {
		t.Fatalf("HTTP_PROXY = %q", proxy)
	}
	if _, leaked := environ(t, pid, "TOOLGATE_EGRESS_NETNS"); leaked {
		t.Fatal("the helper's variable reached the server")
	}
	grandchild, _ := strconv.Atoi(callText(t, s, "spawn"))
	if !waitUntil(5*time.Second, func() bool { return slices.Contains(markedPIDs(t, marker), grandchild) }) {
		t.Fatalf("grandchild %d not seen", grandchild)
	}
	s.Stop()
	if !waitUntil(5*time.Second, func() bool { return len(markedPIDs(t, marker)) == 0 }) {
		t.Fatalf("processes left after Stop: %v", markedPIDs(t, marker))
	}
	if c := children(t); len(c) != 0 {
		t.Fatalf("unreaped children after Stop: %v", c)
	}
}

// TestEgressNamespacesRefused: where the kernel refuses namespaces an
// enforced server does not start, with a message saying so, unless the
// config allows the fallback to monitor mode.
func TestEgressNamespacesRefused(t *testing.T) {
	refuse := func() error { return &egress.NamespaceError{Err: errors.New("operation not permitted")} }
	logs := &logSink{}
	m := NewManager(Options{ProbeNamespaces: refuse, Logger: slog.New(logs)})
	defer m.Close()

	strict, _ := m.Add(withEgress(procConfig("strict", newMarker(t), nil), egress.ModeEnforce, ""))
	if !logs.has("enforce mode unavailable; this server will not start", "server=strict") {
		t.Fatalf("nothing said at Add: %v", logs.recs)
	}
	_, err := strict.CallTool(context.Background(), "pid", nil)
	if err == nil || !strings.Contains(err.Error(), "the kernel refuses a network namespace") {
		t.Fatalf("call to a server that cannot be enforced: %v", err)
	}

	// The server's own env names a proxy; the policy's wins.
	loose, _ := m.Add(withEgress(procConfig("loose", newMarker(t), map[string]string{"HTTPS_PROXY": "http://elsewhere.example:3128"}), egress.ModeEnforce, egress.ModeMonitor))
	if !logs.has("this server runs in monitor mode (fallback)", "server=loose") {
		t.Fatalf("fallback not announced: %v", logs.recs)
	}
	pid, _ := strconv.Atoi(callText(t, loose, "pid"))
	st := loose.Status()
	if st.Egress == nil || st.Egress.Mode != egress.ModeMonitor || st.Egress.Configured != egress.ModeEnforce {
		t.Fatalf("egress status %+v", st.Egress)
	}
	if netns(t, strconv.Itoa(pid)) != netns(t, "self") {
		t.Fatal("a monitor-mode server got a namespace")
	}
	if p, _ := environ(t, pid, "HTTPS_PROXY"); !strings.HasPrefix(p, "http://127.0.0.1:") {
		t.Fatalf("HTTPS_PROXY = %q", p)
	}
}

// TestEgressOffLeavesTheEnvironment: without egress nothing is added, so
// configs written before egress existed behave as before.
func TestEgressOffLeavesTheEnvironment(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("plain", newMarker(t), map[string]string{"HTTP_PROXY": "http://corporate.example:3128"}))
	pid, _ := strconv.Atoi(callText(t, s, "pid"))
	if p, _ := environ(t, pid, "HTTP_PROXY"); p != "http://corporate.example:3128" {
		t.Fatalf("HTTP_PROXY = %q", p)
	}
	if st := s.Status(); st.Egress != nil {
		t.Fatalf("egress status %+v for a server without egress", st.Egress)
	}
}
