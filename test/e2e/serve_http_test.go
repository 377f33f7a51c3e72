package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostLANAddr returns an IPv4 address of this machine outside loopback, or
// skips the test.
func hostLANAddr(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

// nonLoopbackListenArgs are the serve flags to listen on addr, with the
// opt-in a build that refuses unauthenticated network listeners asks for.
func nonLoopbackListenArgs(t *testing.T, addr string) []string {
	t.Helper()
	out, _ := exec.Command(binPath, "serve", "--help").CombinedOutput()
	args := []string{"--listen", addr}
	if strings.Contains(string(out), "insecure-no-auth") {
		args = append(args, "--insecure-no-auth")
	}
	return args
}

// TestServeRefusesRebindingOnANetworkListener: toolgate listening on a
// non-loopback address refuses a request naming another host in Host or
// Origin (a DNS-rebinding page) on /mcp, /status and /metrics, so no
// session opens; its own address, localhost in any case and the configured
// http.allowed_hosts are served.
func TestServeRefusesRebindingOnANetworkListener(t *testing.T) {
	t.Parallel()
	ip := hostLANAddr(t)
	cfgMap := map[string]any{"mcpServers": map[string]any{}, "search": map[string]any{"mode": "lexical"},
		"http": map[string]any{"allowed_hosts": []string{"toolgate.example.test"}}}
	b, _ := json.Marshal(cfgMap)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startHTTP(t, cfg, nonLoopbackListenArgs(t, ip+":0")...)
	base := strings.TrimSuffix(g.URL, "/mcp")
	hostport := strings.TrimPrefix(base, "http://")
	_, port, _ := net.SplitHostPort(hostport)
	if h, _, _ := net.SplitHostPort(hostport); h != ip {
		t.Fatalf("toolgate listens on %s, want %s", hostport, ip)
	}

	do := func(method, path, host, origin string) *http.Response {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"rebind","version":"1"}}}`)
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct {
		name, host, origin string
		ok                 bool
	}{
		{"own address", hostport, "", true},
		{"LOCALHOST", "LOCALHOST:" + port, "", true},
		{"allowed name", "toolgate.example.test:" + port, "", true},
		{"rebinding Host", "rebind.evil.example:" + port, "", false},
		{"rebinding Origin", hostport, "http://rebind.evil.example:" + port, false},
	} {
		for _, p := range []struct{ method, path string }{{http.MethodPost, "/mcp"}, {http.MethodGet, "/status"}, {http.MethodGet, "/metrics"}} {
			resp := do(p.method, p.path, c.host, c.origin)
			if c.ok && resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s with %s: %s, want 200", p.method, p.path, c.name, resp.Status)
			}
			if !c.ok && (resp.StatusCode != http.StatusForbidden || resp.Header.Get("Mcp-Session-Id") != "") {
				t.Errorf("%s %s with %s: %s (session %q), want 403 and no session", p.method, p.path, c.name, resp.Status, resp.Header.Get("Mcp-Session-Id"))
			}
		}
	}
}
