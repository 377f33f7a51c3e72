package e2e

// End-to-end tests of the connections to upstream servers: legacy SSE and
// streamable HTTP against the real server-everything, the private-network
// and deny-pattern guard of load_mcp_server against a real loopback
// listener, what a failed load tells the model, the response size limit
// against a hostile HTTP server, and start errors of a failing Node server.

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startEverything runs server-everything in mode ("sse" or
// "streamableHttp") on a free loopback port and returns its base URL
// (http://127.0.0.1:PORT) once it listens.
func startEverything(t *testing.T, mode string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(npmServer("everything"), mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if !waitFor(30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("server-everything (%s) did not listen on %s\n%s", mode, addr, logs)
	}
	return "http://" + addr
}

// allowPrivate is the load_control setting that lets load_mcp_server reach
// the loopback servers these tests run.
func allowPrivate() map[string]any {
	return map[string]any{"load_control": map[string]any{"deny_private_networks": false}, "shadowing": false}
}

// TestUpstreamSSEAndStreamable reaches server-everything in its legacy SSE
// mode through every path that can pick SSE (the configured transport, the
// automatic fallback, load_mcp_server, test-server --url), and in its
// streamable HTTP mode, with a tool call on each. Before the fix every SSE
// path failed: the SSE stream was bound to the connect timeout's context
// and closed as soon as the start returned ("client is closing").
func TestUpstreamSSEAndStreamable(t *testing.T) {
	t.Parallel()
	sse := startEverything(t, "sse") + "/sse"
	streamable := startEverything(t, "streamableHttp") + "/mcp"
	cfg := coreConfig(t, map[string]any{
		"legacy":     map[string]any{"url": sse, "transport": "sse"},
		"fallback":   map[string]any{"url": sse},
		"streamable": map[string]any{"url": streamable},
	})
	setFilters(t, cfg, allowPrivate())
	cs, logs := startStdio(t, cfg)

	for _, name := range []string{"legacy", "fallback", "streamable"} {
		if got := search(t, cs, "echo a message back", 10); !slices.Contains(got, name+"__echo") {
			t.Fatalf("search = %v, want %s__echo", got, name)
		}
		// Twice, with a pause: the session must outlive the start.
		for i := range 2 {
			wantOK(t, name+"__echo", callTool(t, cs, name+"__echo", map[string]any{"message": "hi " + itoa(i)}), "Echo: hi "+itoa(i))
			time.Sleep(300 * time.Millisecond)
		}
	}
	wantOK(t, "load an SSE url", call(t, cs, "load_mcp_server", map[string]any{"server_name": "loaded", "url": sse}), "loaded")
	if got := search(t, cs, "add two numbers sum", 10); !slices.Contains(got, "loaded__get-sum") {
		t.Fatalf("search after load = %v, want loaded__get-sum", got)
	}
	wantOK(t, "loaded__get-sum", callTool(t, cs, "loaded__get-sum", map[string]any{"a": 2, "b": 3}), "is 5.")
	if !strings.Contains(logs.String(), "connected over legacy SSE") {
		t.Errorf("the fallback server did not log its fall back to SSE")
	}
	noPanic(t, logs.String())

	for _, args := range [][]string{
		{"test-server", "--url", sse},
		{"test-server", "--url", sse, "--transport", "sse"},
		{"test-server", "--url", streamable},
	} {
		out, err := exec.Command(binPath, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "remote: ok") || !strings.Contains(string(out), "echo") {
			t.Errorf("%s: err %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// loopbackListener accepts and counts connections on 127.0.0.1 and
// answers each with an HTTP response carrying secret, so a test can tell
// whether a dial got through and whether anything of the answer leaked.
type loopbackListener struct {
	port     string
	accepted atomic.Int64
}

func startLoopbackListener(t *testing.T, status int, contentType, body string) *loopbackListener {
	return startListener(t, "127.0.0.1:0", status, contentType, body)
}

// startListener is startLoopbackListener on addr; ":0" (every address of
// the host, as many services listen) also answers 127.0.0.2, ::1 and the
// rest.
func startListener(t *testing.T, addr string, status int, contentType, body string) *loopbackListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &loopbackListener{}
	_, l.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			w.Write([]byte(body))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				l.accepted.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return l
}

// hostsAliases returns the names /etc/hosts maps to a loopback address.
func hostsAliases(t *testing.T) []string {
	f, err := os.Open("/etc/hosts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.SplitN(sc.Text(), "#", 2)[0])
		if len(fields) < 2 || !(strings.HasPrefix(fields[0], "127.") || fields[0] == "::1") {
			continue
		}
		names = append(names, fields[1:]...)
	}
	return names
}

// bypassHosts are the hosts (as written in a URL's authority, without the
// port) that reached a loopback listener past deny patterns for
// 127.0.0.1, [::1] and localhost before the fix.
func bypassHosts(t *testing.T) []string {
	hosts := []string{
		"[::1%25lo]", "[::1%25eth0]", "[fe80::1%25lo]", // IPv6 zones
		"0.0.0.0", "[::]", "[0:0:0:0:0:0:0:0]", // unspecified: the local host
		"127.0.0.2", "127.1.2.3", "127.255.255.254", // the rest of 127/8
		"[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0::1]", // other spellings
		"2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1", "0x7f000001", "017700000001", "127.0.1", // libc-only numbers
		"LOCALHOST", "localhost.", "127.0.0.1.", // case, trailing dots
	}
	for _, a := range hostsAliases(t) {
		if !strings.EqualFold(a, "localhost") {
			hosts = append(hosts, a)
		}
	}
	return hosts
}

// TestLoadControlBypasses loads every bypass of issue 14 item 2 at a real
// loopback listener and proves no connection reaches it: once with only
// the deny patterns (deny_private_networks off), and once with the
// defaults (no load_control at all: private networks are refused). Before
// the fix the listener accepted connections for most of them.
func TestLoadControlBypasses(t *testing.T) {
	t.Parallel()
	// On every address, as a service that forgot to bind to loopback only:
	// so 127.0.0.2, [::1] and the rest would reach it.
	target := startListener(t, ":0", 200, "text/plain", "not an mcp server")
	patterns := coreConfig(t, map[string]any{})
	setFilters(t, patterns, map[string]any{"load_control": map[string]any{
		"deny_private_networks": false,
		"deny_url_patterns":     []string{"http://127.0.0.1:*", "http://[::1]:*", "http://localhost:*"},
	}})
	defaults := coreConfig(t, map[string]any{})
	for _, c := range []struct{ name, cfg string }{{"patterns", patterns}, {"defaults", defaults}} {
		cs, logs := startStdio(t, c.cfg)
		for i, h := range bypassHosts(t) {
			url := "http://" + h + ":" + target.port + "/mcp"
			before := target.accepted.Load()
			res := call(t, cs, "load_mcp_server", map[string]any{"server_name": "b" + itoa(i), "url": url})
			if !res.IsError {
				t.Errorf("%s: %s was loaded: %s", c.name, url, text(res))
				continue
			}
			if n := target.accepted.Load() - before; n != 0 {
				t.Errorf("%s: %s: the listener accepted %d connection(s); refusal: %s", c.name, url, n, text(res))
			}
			// Trailing-dot names go to DNS, which does not know them.
			if !strings.Contains(text(res), "refused") && !strings.Contains(text(res), "name not found") {
				t.Errorf("%s: %s: want a refusal, got %s", c.name, url, text(res))
			}
		}
		noPanic(t, logs.String())
	}
	// Control: with neither the patterns nor the default, the same kind of
	// URL does reach the listener, so the zeros above mean something.
	open := coreConfig(t, map[string]any{})
	setFilters(t, open, map[string]any{"load_control": map[string]any{"deny_private_networks": false}})
	ocs, _ := startStdio(t, open)
	before := target.accepted.Load()
	for i, h := range []string{"localhost", "127.0.0.2", "0.0.0.0"} {
		call(t, ocs, "load_mcp_server", map[string]any{"server_name": "control" + itoa(i), "url": "http://" + h + ":" + target.port + "/mcp"})
		if target.accepted.Load() == before {
			t.Fatalf("control: an unguarded load of %s did not reach the listener", h)
		}
		before = target.accepted.Load()
	}
	// A public-looking name that resolves nowhere is not refused as
	// private: the guard judges addresses, not names.
	cs, _ := startStdio(t, defaults)
	res := call(t, cs, "load_mcp_server", map[string]any{"server_name": "nowhere", "url": "http://nowhere.invalid/mcp"})
	wantRefused(t, "unresolvable name", res, "could not connect", "name not found")
}

// TestLoadErrorsLeakNothing loads internal HTTP endpoints that answer with
// a secret-looking body (deny_private_networks off, as if they were
// elsewhere on the network): the model must learn only the class of
// failure, never a byte of the answer. Before the fix the first line of the
// body came back in the error.
func TestLoadErrorsLeakNothing(t *testing.T) {
	t.Parallel()
	const secret = "INTERNAL-ADMIN-PANEL root_password=hunter2-7c1e9b api_key=sk-live-5f0c2a"
	cfg := coreConfig(t, map[string]any{})
	setFilters(t, cfg, allowPrivate())
	cs, logs := startStdio(t, cfg)
	for i, c := range []struct {
		status int
		ctype  string
		body   string
		want   string
	}{
		{200, "text/html", secret + "\n<html>more</html>", "not an mcp server"},
		{200, "application/json", `{"error":"` + secret + `"}`, "could not connect"},
		{200, "text/event-stream", "event: endpoint\ndata: " + secret + "\n\n", "could not connect"},
		{500, "text/plain", secret, "HTTP status 500"},
		{404, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"` + secret + `"}}`, "HTTP status 404"},
		{400, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"` + secret + `"}}`, "HTTP status 400"},
	} {
		l := startLoopbackListener(t, c.status, c.ctype, c.body)
		res := call(t, cs, "load_mcp_server", map[string]any{"server_name": "probe" + itoa(i), "url": "http://127.0.0.1:" + l.port + "/"})
		for _, frag := range strings.FieldsFunc(secret, func(r rune) bool { return r == ' ' || r == '=' }) {
			if strings.Contains(text(res), frag) {
				t.Errorf("status %d %s: the error shows %q of the response: %s", c.status, c.ctype, frag, text(res))
			}
		}
		wantRefused(t, c.ctype+" "+itoa(c.status), res, c.want)
	}
	// Nothing listening: the class, not the address's details.
	wantRefused(t, "closed port", call(t, cs, "load_mcp_server", map[string]any{"server_name": "closed", "url": "http://" + freeAddr(t) + "/mcp"}), "connection refused")
	noPanic(t, logs.String())
}

// startHostile runs test/servers/hostilehttp with args and returns its URL.
func startHostile(t *testing.T, args ...string) string {
	t.Helper()
	bin := helperBinary(t, "hostilehttp", "./test/servers/hostilehttp")
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("hostilehttp: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestHTTPResponseLimit sends answers over the response limit from a
// hostile HTTP server, as a chunked JSON body, a JSON body with its length,
// and an SSE event: each call fails at once with an error naming the server
// and the limit, and the server keeps working for the next call. Before the
// fix the gateway read any size (a 200 MB answer took 2.27 GB of RSS).
func TestHTTPResponseLimit(t *testing.T) {
	t.Parallel()
	servers := map[string]any{}
	for name, args := range map[string][]string{
		"chunked": nil,
		"length":  {"-content-length"},
		"events":  {"-sse"},
	} {
		servers[name] = map[string]any{"url": startHostile(t, args...), "max_response_bytes": 1 << 20}
	}
	// The gateway-wide setting applies to a server without its own.
	servers["wide"] = map[string]any{"url": startHostile(t, "-sse")}
	cfg := coreConfig(t, servers)
	b, _ := os.ReadFile(cfg)
	b = []byte(strings.Replace(string(b), "{", `{"max_response_bytes": 2097152,`, 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cs, logs := startStdio(t, cfg)
	search(t, cs, "returns a text result of the given size", 20)
	for _, c := range []struct {
		name  string
		limit string
	}{{"chunked", "1048576"}, {"length", "1048576"}, {"events", "1048576"}, {"wide", "2097152"}} {
		// Just under the limit passes.
		wantOK(t, c.name+" small", callTool(t, cs, c.name+"__huge", map[string]any{"bytes": 500_000}), "aaaa")
		res := callTool(t, cs, c.name+"__huge", map[string]any{"bytes": 30 << 20})
		wantRefused(t, c.name+" huge", res, `"`+c.name+`"`, c.limit, "max_response_bytes")
		if len(text(res)) > 4096 {
			t.Errorf("%s: the refusal is %d bytes long", c.name, len(text(res)))
		}
		wantOK(t, c.name+" after", callTool(t, cs, c.name+"__huge", map[string]any{"bytes": 10}), "aaaaaaaaaa")
	}
	noPanic(t, logs.String())
}

// TestStartErrorNamesTheError starts a Node server that fails with an
// Error and then prints more lines (as Node does: the stack, then
// "Node.js v22..."): the start error must quote the Error line. Before the
// fix it quoted the last line, "Node.js vNN".
func TestStartErrorNamesTheError(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the npm MCP servers and this test")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "fail.js")
	os.WriteFile(script, []byte("console.error('starting up');\nthrow new Error('missing GITHUB_TOKEN: set it in env');\n"), 0o600)
	cfg := coreConfig(t, map[string]any{"failing": map[string]any{"command": node, "args": []string{script}}})
	out, _ := exec.Command(binPath, "test-server", "--config", cfg, "failing").CombinedOutput()
	// The verdict, not the log lines that relay the server's stderr.
	var verdict string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "did not work") {
			verdict = l
		}
	}
	if !strings.Contains(verdict, "Error: missing GITHUB_TOKEN: set it in env") {
		t.Fatalf("test-server did not name the Error line in its verdict %q:\n%s", verdict, out)
	}
	if !strings.Contains(string(out), "Node.js v") {
		t.Logf("note: this node does not print its version last:\n%s", out)
	}
}
