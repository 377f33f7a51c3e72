package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// httpGateway builds a gateway with no upstreams (unless given) and the
// given http config, served by its own http.Server on ln.
func httpGateway(t *testing.T, hc config.HTTP, servers map[string]*config.Server, timeouts httpTimeouts, lns ...net.Listener) *Gateway {
	t.Helper()
	for n, s := range servers {
		s.Name = n
	}
	if servers == nil {
		servers = map[string]*config.Server{}
	}
	cfg := &config.Config{Servers: servers, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}, HTTP: hc}
	g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := g.httpServer(timeouts, "gw-listen.example.test:0")
	for _, ln := range lns {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return g
}

func listen(t *testing.T, host string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// nonLoopbackIP returns an address of this machine outside loopback, or
// skips the test.
func nonLoopbackIP(t *testing.T) string {
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

// rawRequest sends one request with the given Host and Origin headers.
func rawRequest(t *testing.T, method, url, host, origin, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %q): %v", method, url, host, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestHostAndOriginCheckedOnEveryListener: a DNS-rebinding page sends its
// own name as Host (and Origin). It must be refused on a non-loopback
// listener as on loopback, on every path; allowed names compare without
// regard to case.
func TestHostAndOriginCheckedOnEveryListener(t *testing.T) {
	lan := listen(t, nonLoopbackIP(t))
	lo := listen(t, "127.0.0.1")
	httpGateway(t, config.HTTP{AllowedHosts: []string{"gw.example.test"}}, nil, defaultHTTPTimeouts, lan, lo)

	for _, ln := range []net.Listener{lan, lo} {
		addr := ln.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		base := "http://" + addr
		cases := []struct {
			name, host, origin string
			ok                 bool
		}{
			{"listen address", addr, "", true},
			{"localhost upper case", "LOCALHOST:" + port, "", true},
			{"localhost with trailing dot", "localhost.:" + port, "", true},
			{"loopback IP", "127.0.0.1:" + port, "", true},
			{"allowed name, any case", "GW.Example.TEST:" + port, "", true},
			{"listen name", "gw-listen.example.test:" + port, "", true},
			{"same-host origin", addr, "http://" + addr, true},
			{"rebinding name", "rebind.evil.example:" + port, "", false},
			{"rebinding name, no port", "rebind.evil.example", "", false},
			{"allowed name as a suffix", "gw.example.test.evil.example", "", false},
			{"localhost as a prefix", "localhost.evil.example", "", false},
			{"other IP", "203.0.113.9:" + port, "", false},
			{"rebinding origin", addr, "http://rebind.evil.example:" + port, false},
			{"null origin", addr, "null", false},
		}
		for _, c := range cases {
			for _, p := range []struct{ method, path, body string }{
				{http.MethodPost, "/mcp", initBody},
				{http.MethodGet, "/status", ""},
				{http.MethodGet, "/metrics", ""},
			} {
				resp := rawRequest(t, p.method, base+p.path, c.host, c.origin, "", p.body)
				refused := resp.StatusCode == http.StatusForbidden
				if refused == c.ok {
					t.Errorf("listener %s, %s %s, %s (Host %q, Origin %q): status %s", addr, p.method, p.path, c.name, c.host, c.origin, resp.Status)
				}
				if !c.ok && resp.Header.Get("Mcp-Session-Id") != "" {
					t.Errorf("listener %s, %s: a refused request opened session %s", addr, c.name, resp.Header.Get("Mcp-Session-Id"))
				}
				if c.ok && resp.StatusCode != http.StatusOK {
					t.Errorf("listener %s, %s %s, %s: status %s, want 200", addr, p.method, p.path, c.name, resp.Status)
				}
			}
		}
	}
}

// openSession initializes a stateful session and returns its id.
func openSession(t *testing.T, base string) string {
	t.Helper()
	resp := rawRequest(t, http.MethodPost, base+"/mcp", "", "", "", initBody)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	return id
}

// alive reports whether the gateway still knows a session.
func alive(t *testing.T, base, id string) bool {
	t.Helper()
	resp := rawRequest(t, http.MethodPost, base+"/mcp", "", "", id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("ping on session %s: %s", id, resp.Status)
	return false
}

func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSessionsAreCapped: unauthenticated clients cannot hold more than
// http.max_sessions; the least recently used session goes first.
func TestSessionsAreCapped(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	max := 3
	httpGateway(t, config.HTTP{MaxSessions: &max}, nil, defaultHTTPTimeouts, ln)
	base := "http://" + ln.Addr().String()

	ids := []string{openSession(t, base), openSession(t, base), openSession(t, base)}
	if !alive(t, base, ids[0]) { // the oldest is now the most recently used
		t.Fatal("first session gone before the cap was reached")
	}
	ids = append(ids, openSession(t, base), openSession(t, base))
	want := map[int]bool{0: true, 1: false, 2: false, 3: true, 4: true}
	for i, id := range ids {
		if got := alive(t, base, id); got != want[i] {
			t.Errorf("session %d alive = %v, want %v", i, got, want[i])
		}
	}
	m := metricsText(t, base)
	for _, line := range []string{"toolgate_http_sessions 3", "toolgate_http_sessions_evicted_total 2"} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// TestIdleSessionsExpire: http.session_idle_timeout closes a session that
// makes no request.
func TestIdleSessionsExpire(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	idle := 0.2
	httpGateway(t, config.HTTP{SessionIdleTimeout: &idle}, nil, defaultHTTPTimeouts, ln)
	base := "http://" + ln.Addr().String()
	id := openSession(t, base)
	deadline := time.Now().Add(30 * time.Second)
	for alive(t, base, id) {
		if time.Now().After(deadline) {
			t.Fatal("an idle session was never closed")
		}
		time.Sleep(500 * time.Millisecond) // longer than the timeout: each ping must not keep it alive
	}
}

// closedByServer reports whether the server closes conn (EOF, reset, or an
// error answer followed by close) before the client gives up.
func closedByServer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// TestSlowClientsAreCutOffStreamsAreNot: a client trickling its headers or
// body, or holding an idle keep-alive connection, is disconnected; a GET
// stream and a tool call answered after longer than those timeouts keep
// working.
func TestSlowClientsAreCutOffStreamsAreNot(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	short := httpTimeouts{header: 300 * time.Millisecond, body: 300 * time.Millisecond, idle: 300 * time.Millisecond, smallWrite: 5 * time.Second}
	up := slowUpstream(t, time.Second)
	g := httpGateway(t, config.HTTP{}, map[string]*config.Server{"slow": {URL: up, Transport: config.TransportStreamableHTTP}}, short, ln)
	addr := ln.Addr().String()

	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Slow headers.
	c := dial()
	io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
	if !closedByServer(t, c) {
		t.Error("a client that never finishes its headers was not cut off")
	}
	// Slow body: 10 of 100 bytes, then nothing.
	c = dial()
	io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
	if !closedByServer(t, c) {
		t.Error("a client that trickles its body was not cut off")
	}
	// Idle keep-alive after a complete request.
	c = dial()
	io.WriteString(c, "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("an idle keep-alive connection was not closed: %v", err)
	}

	// A real client: its GET stream outlives every timeout above and still
	// delivers a notification, and a tool call whose answer takes longer
	// than the body timeout succeeds.
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "sleep then answer"}}); err != nil || res.IsError {
		t.Fatalf("search: %v %+v", err, res)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "slow__nap", "arguments": map[string]any{}}})
	if err != nil || res.IsError {
		t.Fatalf("a call answered after the body timeout failed: %v %+v", err, res)
	}
	g.toolsChanged()
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the GET stream stopped delivering notifications after the timeouts passed")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// slowUpstream serves one tool, nap, that answers after d.
func slowUpstream(t *testing.T, d time.Duration) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "nap", Description: "Sleep then answer", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "awake"}}}, nil
	})
	ln := listen(t, "127.0.0.1")
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// openStream opens a session's GET stream and keeps it open until the test
// ends.
func openStream(t *testing.T, base, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream of %s: %s", id, resp.Status)
	}
}

// TestSessionCapPrefersIdleAndCannotBeLockedOut: sessions holding a GET
// stream are kept over idle ones, but when every session holds one, a new
// client still gets in (the least recently used goes).
func TestSessionCapPrefersIdleAndCannotBeLockedOut(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	max := 2
	httpGateway(t, config.HTTP{MaxSessions: &max}, nil, defaultHTTPTimeouts, ln)
	base := "http://" + ln.Addr().String()

	streaming := openSession(t, base)
	openStream(t, base, streaming)
	idle := openSession(t, base) // used more recently, but idle
	third := openSession(t, base)
	if alive(t, base, idle) || !alive(t, base, streaming) || !alive(t, base, third) {
		t.Fatalf("want the idle session evicted, not the streaming one")
	}
	openStream(t, base, third)
	// Every session now holds a stream: a new client is still admitted.
	fourth := openSession(t, base)
	if !alive(t, base, fourth) {
		t.Fatal("new session refused while every slot held a stream")
	}
	if alive(t, base, streaming) {
		t.Fatal("the least recently used streaming session was kept over the cap")
	}
}
