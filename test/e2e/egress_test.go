package e2e

// Egress: what a stdio server may connect to. All traffic stays on this
// machine: a backend and a raw listener on loopback, and the network
// namespaces enforce mode creates.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// egressRig is a backend the server may fetch from and a listener it may
// not reach.
type egressRig struct {
	backend  *httptest.Server
	port     int    // the backend's
	raw      string // 127.0.0.1:PORT of the raw listener
	rawPort  int
	accepted atomic.Int64 // connections the raw listener took
	node     string
}

func newEgressRig(t *testing.T) *egressRig {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	r := &egressRig{node: node}
	r.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, "backend answer for "+req.URL.Path)
	}))
	t.Cleanup(r.backend.Close)
	r.port = r.backend.Listener.Addr().(*net.TCPAddr).Port
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.raw, r.rawPort = l.Addr().String(), l.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.accepted.Add(1)
			// Held open until the test ends, so a monitor-mode
			// server's direct connection stays visible to the sampler.
			t.Cleanup(func() { c.Close() })
		}
	}()
	return r
}

func (r *egressRig) server(egress map[string]any) map[string]any {
	return map[string]any{
		"command": r.node,
		"args":    []string{filepath.Join(repoRoot, "test", "e2e", "testdata", "egress_server.mjs")},
		"egress":  egress,
	}
}

// netCall calls a tool of the "net" server (the configs are in
// passthrough mode: the tools are listed as they are).
func netCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res := call(t, cs, "net__"+tool, args)
	return text(res), res.IsError
}

// networkEvents reads the mcp_network_connection events through
// `toolgate events --type network`.
func networkEvents(t *testing.T, state string) []map[string]any {
	t.Helper()
	return auditEvents(t, state, "--type", "network")
}

func hasEvent(evs []map[string]any, action, host string, port int) bool {
	for _, e := range evs {
		f, _ := e["fields"].(map[string]any)
		if e["type"] == "mcp_network_connection" && e["action"] == action && e["server"] == "net" &&
			f["host"] == host && f["port"] == float64(port) {
			return true
		}
	}
	return false
}

// TestEgressMonitor: a cooperative server's fetches go through the proxy,
// which lets the listed host through and refuses the rest with a clear
// error and an event; a raw socket still connects (monitor mode does not
// stop a server that ignores the proxy).
func TestEgressMonitor(t *testing.T) {
	r := newEgressRig(t)
	cfg := writePassthroughConfig(t, map[string]any{"net": r.server(map[string]any{
		"mode": "monitor", "allow": []string{fmt.Sprintf("127.0.0.1:%d", r.port)},
	})}, nil, nil)
	state := t.TempDir()
	cs, _ := startStdio(t, cfg, "--state-dir", state)

	out, isErr := netCall(t, cs, "env", map[string]any{})
	if isErr || !strings.Contains(out, "HTTP_PROXY=http://127.0.0.1:") || !strings.Contains(out, "NO_PROXY=\n") {
		t.Fatalf("proxy variables: %q", out)
	}
	r.checkFetches(t, cs)
	if out, _ := netCall(t, cs, "raw_connect", map[string]any{"host": "127.0.0.1", "port": r.rawPort}); out != "connected" {
		t.Fatalf("raw connection in monitor mode: %q", out)
	}
	// The server saw its connect succeed; the listener's accept loop may
	// count it a moment later.
	if !waitFor(5*time.Second, func() bool { return r.accepted.Load() == 1 }) {
		t.Fatalf("raw listener accepted %d connections", r.accepted.Load())
	}
	r.checkEvents(t, state)
	// The direct connection is sampled from /proc and reported as an
	// alert (bounded wait: the sampler looks every 200ms).
	deadline := time.Now().Add(15 * time.Second)
	for !hasEvent(networkEvents(t, state), "alert", "127.0.0.1", r.rawPort) {
		if time.Now().After(deadline) {
			t.Fatalf("no alert for the direct connection in %v", networkEvents(t, state))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkFetches: the listed host answers; a name that resolves to loopback,
// the listener's address and IPv6 forms of loopback are refused.
func (r *egressRig) checkFetches(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	out, isErr := netCall(t, cs, "fetch", map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/ok", r.port)})
	if isErr || out != "backend answer for /ok" {
		t.Fatalf("allowed fetch: %q (error %v)", out, isErr)
	}
	for _, u := range []string{
		fmt.Sprintf("http://localhost:%d/", r.port),          // a name resolving to 127.0.0.1
		fmt.Sprintf("http://%s/", r.raw),                     // a host not listed
		fmt.Sprintf("http://[::1]:%d/", r.port),              // IPv6 loopback
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", r.port), // IPv4-mapped form of the listed address
		fmt.Sprintf("http://2130706433:%d/", r.port),         // 127.0.0.1 as one number
	} {
		out, isErr := netCall(t, cs, "fetch", map[string]any{"url": u})
		if !isErr || !strings.Contains(out, "HTTP 403: toolgate egress: connection to") || !strings.Contains(out, "refused") {
			t.Errorf("fetch %s: %q (error %v), want a 403 from the proxy", u, out, isErr)
		}
	}
}

func (r *egressRig) checkEvents(t *testing.T, state string) {
	t.Helper()
	evs := networkEvents(t, state)
	if !hasEvent(evs, "allow", "127.0.0.1", r.port) {
		t.Errorf("no allow event for the backend in %v", evs)
	}
	if !hasEvent(evs, "block", "localhost", r.port) || !hasEvent(evs, "block", "127.0.0.1", r.rawPort) || !hasEvent(evs, "block", "::1", r.port) {
		t.Errorf("refusals missing from %v", evs)
	}
	for _, e := range evs {
		if e["type"] != "mcp_network_connection" {
			t.Errorf("--type network listed %v", e["type"])
		}
	}
	for _, e := range evs {
		f, _ := e["fields"].(map[string]any)
		if e["action"] == "allow" && (f["bytes_in"] == float64(0) || f["bytes_out"] == nil) {
			t.Errorf("allow event without byte counts: %v", e)
		}
	}
}

// needNetns skips when the kernel refuses network namespaces; it runs
// everywhere they exist (root, or unprivileged user namespaces allowed).
func needNetns(t *testing.T) {
	t.Helper()
	out, err := exec.Command("unshare", "--net", "true").CombinedOutput()
	if err == nil {
		return
	}
	if out2, err2 := exec.Command("unshare", "--user", "--net", "true").CombinedOutput(); err2 == nil {
		return
	} else {
		out = append(out, out2...)
	}
	if _, lerr := exec.LookPath("unshare"); lerr != nil && os.Geteuid() == 0 {
		return // cannot tell without unshare(1); root can
	}
	t.Skipf("the kernel refuses network namespaces here (%v: %s); enforce mode cannot be tested", err, strings.TrimSpace(string(out)))
}

// TestEgressEnforce: the same server in enforce mode fetches through the
// proxy as before, but its raw socket reaches nothing: its namespace has
// only its own loopback.
func TestEgressEnforce(t *testing.T) {
	needNetns(t)
	r := newEgressRig(t)
	cfg := writePassthroughConfig(t, map[string]any{"net": r.server(map[string]any{
		"mode": "enforce", "allow": []string{fmt.Sprintf("127.0.0.1:%d", r.port)},
	})}, nil, nil)
	state := t.TempDir()
	g := startHTTP(t, cfg, "--state-dir", state)
	cs := connectHTTP(t, g.URL, "")

	r.checkFetches(t, cs)
	out, _ := netCall(t, cs, "raw_connect", map[string]any{"host": "127.0.0.1", "port": r.rawPort})
	if !strings.HasPrefix(out, "error: ECONNREFUSED") {
		t.Errorf("raw connection in enforce mode: %q, want ECONNREFUSED (the namespace's own loopback)", out)
	}
	out, _ = netCall(t, cs, "raw_connect", map[string]any{"host": "192.0.2.1", "port": 80})
	if !strings.HasPrefix(out, "error: ENETUNREACH") {
		t.Errorf("raw connection off the host in enforce mode: %q, want ENETUNREACH", out)
	}
	if n := r.accepted.Load(); n != 0 {
		t.Errorf("the raw listener accepted %d connections from an enforced server", n)
	}
	r.checkEvents(t, state)

	// toolgate status shows the mode and what the proxy saw.
	out2, err := exec.Command(binPath, "status", "--addr", strings.TrimSuffix(g.URL, "/mcp")).CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate status: %v\n%s", err, out2)
	}
	var row string
	for _, l := range strings.Split(string(out2), "\n") {
		if strings.HasPrefix(l, "net ") && strings.Contains(l, "enforce") {
			row = l
		}
	}
	// One allowed fetch, five refused, the last of them the number form.
	if f := strings.Fields(row); len(f) < 8 || f[2] != "1" || f[3] != "1" || f[4] != "5" || f[7] != fmt.Sprintf("2130706433:%d", r.port) {
		t.Errorf("egress row of toolgate status: %q in\n%s", row, out2)
	}
}

// TestEgressEnforceNpmServers: the npm servers need no network and keep
// working with egress enforced and nothing allowed (the gateway default).
func TestEgressEnforceNpmServers(t *testing.T) {
	needNetns(t)
	cfg := writePassthroughConfig(t, defaultServers(t), map[string]any{
		"egress": map[string]any{"default": map[string]any{"mode": "enforce", "allow": []string{}}},
	}, nil)
	g := startHTTP(t, cfg)
	cs := connectHTTP(t, g.URL, "")
	res := call(t, cs, "everything__echo", map[string]any{"message": "through the namespace"})
	if res.IsError || !strings.Contains(text(res), "through the namespace") {
		t.Fatalf("everything__echo: %s", text(res))
	}
	res = call(t, cs, "filesystem__read_text_file", map[string]any{"path": "hello.txt"})
	if res.IsError || !strings.Contains(text(res), "hello from the sandbox") {
		t.Fatalf("filesystem: %s", text(res))
	}
	res = call(t, cs, "memory__read_graph", map[string]any{})
	if res.IsError {
		t.Fatalf("memory: %s", text(res))
	}
	// Each ran in enforce mode (none fell back).
	out, err := exec.Command(binPath, "status", "--addr", strings.TrimSuffix(g.URL, "/mcp"), "--json").Output()
	if err != nil {
		t.Fatalf("toolgate status: %v", err)
	}
	var st struct {
		Servers []struct {
			Name   string
			Egress *struct{ Mode, Configured string }
		}
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Servers {
		if s.Egress == nil || s.Egress.Mode != "enforce" || s.Egress.Configured != "" {
			t.Errorf("server %s: egress %+v, want enforce", s.Name, s.Egress)
		}
	}
	if len(st.Servers) != 3 {
		t.Errorf("status lists %d servers", len(st.Servers))
	}
}

// TestEgressPolicyLearns: policy generate locks a server's egress to the
// hosts it used in the session, in enforce mode, and lists what its proxy
// refused for review.
func TestEgressPolicyLearns(t *testing.T) {
	r := newEgressRig(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {}))
	defer other.Close()
	cfg := writePassthroughConfig(t, map[string]any{"net": r.server(map[string]any{
		"mode": "monitor", "allow": []string{fmt.Sprintf("127.0.0.1:%d", r.port), other.Listener.Addr().String()},
	})}, nil, nil)
	state := t.TempDir()
	cs, _ := startStdio(t, cfg, "--state-dir", state)
	if out, isErr := netCall(t, cs, "fetch", map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/used", r.port)}); isErr {
		t.Fatalf("fetch: %s", out)
	}
	if _, isErr := netCall(t, cs, "fetch", map[string]any{"url": fmt.Sprintf("http://localhost:%d/", r.port)}); !isErr {
		t.Fatal("a refused fetch succeeded")
	}
	cs.Close()
	var sid string
	for _, e := range auditEvents(t, state) {
		if e["type"] == "tool_call_intercepted" && e["session"] != nil {
			sid, _ = e["session"].(string)
		}
	}
	if sid == "" {
		t.Fatal("no session in the audit log")
	}
	locked := filepath.Join(t.TempDir(), "locked.json")
	out, err := exec.Command(binPath, "policy", "generate", "--config", cfg, "--state-dir", state, "--session", sid, "--output", locked).CombinedOutput()
	if err != nil {
		t.Fatalf("policy generate: %v\n%s", err, out)
	}
	var got struct {
		MCPServers map[string]struct {
			Egress struct {
				Mode  string   `json:"mode"`
				Allow []string `json:"allow"`
			} `json:"egress"`
		} `json:"mcpServers"`
		Review struct {
			Refused []struct {
				Server, Target string
				Count          int
			} `json:"egress_refused"`
		} `json:"review"`
	}
	data, _ := os.ReadFile(locked)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	eg := got.MCPServers["net"].Egress
	if eg.Mode != "enforce" || len(eg.Allow) != 1 || eg.Allow[0] != fmt.Sprintf("127.0.0.1:%d", r.port) {
		t.Fatalf("locked egress %+v, want enforce with the one host used:\n%s", eg, data)
	}
	rf := got.Review.Refused
	if len(rf) != 1 || rf[0].Server != "net" || rf[0].Target != fmt.Sprintf("localhost:%d", r.port) {
		t.Fatalf("refused for review: %+v", rf)
	}
	// The locked config loads.
	if out, err := exec.Command(binPath, "config", "check", "--config", locked).CombinedOutput(); err != nil && strings.Contains(string(out), "egress") {
		t.Fatalf("config check of the locked config: %v\n%s", err, out)
	}
}
