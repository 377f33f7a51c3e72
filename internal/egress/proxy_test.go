package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// events collects a proxy's reports.
type events struct {
	mu    sync.Mutex
	all   []Event
	taken int // how many last has returned past
}

func (e *events) add(ev Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

// last waits for an event newer than those seen by the previous call and
// returns the newest: the proxy reports a connection when it ends, which
// may be just after the client has its answer.
func (e *events) last(t *testing.T) Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		if n := len(e.all); n > e.taken {
			e.taken = n
			ev := e.all[n-1]
			e.mu.Unlock()
			return ev
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no event recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startProxy serves a proxy with the given allow list on a loopback port.
func startProxy(t *testing.T, allow ...string) (*Proxy, string, *events) {
	t.Helper()
	rules, err := ParseRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	p := New(Options{Server: "srv", Mode: ModeMonitor, Rules: rules, Report: ev.add})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	t.Cleanup(func() { p.Close() })
	return p, l.Addr().String(), ev
}

func proxyClient(addr string) *http.Client {
	u := &url.URL{Scheme: "http", Host: addr}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

func TestProxyForwardsHTTP(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s", r.URL.Path, body)
	}))
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	p, addr, ev := startProxy(t, fmt.Sprintf("127.0.0.1:%d", port))
	resp, err := proxyClient(addr).Post(backend.URL+"/x", "text/plain", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello /x abc" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	e := ev.last(t)
	if e.Decision != Allow || e.Server != "srv" || e.Host != "127.0.0.1" || int(e.Port) != port || e.BytesOut != 3 || e.BytesIn != int64(len(body)) || e.Method != "POST" {
		t.Fatalf("event %+v", e)
	}
	if s := p.Stats(); s.Connections != 1 || s.BytesIn != int64(len(body)) {
		t.Fatalf("stats %+v", s)
	}
}

// connectThrough opens a CONNECT tunnel through the proxy at addr.
func connectThrough(t *testing.T, addr, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestProxyTunnels(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 4)
		io.ReadFull(c, b)
		c.Write([]byte(strings.ToUpper(string(b)) + "!"))
	}()
	p, addr, ev := startProxy(t, l.Addr().String())
	c, resp := connectThrough(t, addr, l.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	c.Write([]byte("ping"))
	got, _ := io.ReadAll(c)
	if string(got) != "PING!" {
		t.Fatalf("tunnel returned %q", got)
	}
	c.Close()
	p.Close() // waits for nothing; the event comes when the tunnel ends
	for range 200 {
		ev.mu.Lock()
		n := len(ev.all)
		ev.mu.Unlock()
		if n > 0 {
			break
		}
		waitABit()
	}
	e := ev.last(t)
	if e.Decision != Allow || e.Method != "CONNECT" || e.BytesOut != 4 || e.BytesIn != 5 || e.Addr != l.Addr().String() {
		t.Fatalf("event %+v", e)
	}
}

// TestProxyRefuses covers what the allow list must refuse, names and
// address forms included: only the listed host:port gets through, and a
// name never reaches a private address the list does not name.
func TestProxyRefuses(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "reached")
	}))
	defer backend.Close()
	port := fmt.Sprint(backend.Listener.Addr().(*net.TCPAddr).Port)
	// localhost is listed by name only: it resolves to loopback, which the
	// list does not name as an address.
	p, addr, ev := startProxy(t, "localhost:"+port, "*.example.test:"+port, "[::2]:"+port)
	cases := []struct{ target, why string }{
		{"127.0.0.1:" + port, "not in server"},
		{"localhost:" + port, "resolves to"},
		{"localhost.:" + port, "resolves to"},
		{"LOCALHOST:" + port, "resolves to"},
		{"[::1]:" + port, "not in server"},
		{"[::ffff:127.0.0.1]:" + port, "not in server"},
		{"[::ffff:7f00:1]:" + port, "not in server"},
		{"2130706433:" + port, "number that some resolvers"},
		{"0x7f.0.0.1:" + port, "number that some resolvers"},
		{"127.1:" + port, "number that some resolvers"},
		{"169.254.169.254:80", "not in server"},
		{"example.test:" + port, "not in server"}, // the wildcard is for names below it
		{"evilexample.test:" + port, "not in server"},
		{"localhost:1", "not in server"},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			target := tc.target
			_, resp := connectThrough(t, addr, target)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tc.why) {
				t.Fatalf("CONNECT %s: %s %q, want 403 saying %q", target, resp.Status, body, tc.why)
			}
			if e := ev.last(t); e.Decision != Block || !strings.Contains(e.Reason, tc.why) {
				t.Fatalf("event %+v", e)
			}
			{
				// The same refusal for plain HTTP forwarding.
				resp, err := proxyClient(addr).Get("http://" + tc.target + "/")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "reached") {
					t.Fatalf("GET %s: %s %q", tc.target, resp.Status, body)
				}
			}
		})
	}
	if s := p.Stats(); s.Connections != 0 || s.Refused == 0 || s.LastRefused == "" {
		t.Fatalf("stats %+v", s)
	}
}

func TestProxyRejectsNonProxyRequests(t *testing.T) {
	_, addr, _ := startProxy(t, "*:*")
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("origin-form request: %s", resp.Status)
	}
	// A huge header is cut off by the server's limit.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized header: %s", r.Status)
	}
}

// TestAddressWithTrailingDotIsAnAddress: "8.8.8.8." is not a name, so a
// name pattern ("*") does not admit it.
func TestAddressWithTrailingDotIsAnAddress(t *testing.T) {
	rules, _ := ParseRules([]string{"*:443"})
	tg, err := ParseTarget("8.8.8.8.:443")
	if err != nil {
		t.Fatal(err)
	}
	if !tg.Addr.IsValid() || rules.Admit(tg) {
		t.Fatalf("%+v admitted by a name pattern", tg)
	}
	if r, err := ParseRule("10.0.0.1.:80"); err != nil || !r.Addr.IsValid() {
		t.Fatalf("rule %+v, %v", r, err)
	}
}

func TestParseTargetRefusesZones(t *testing.T) {
	if _, err := ParseTarget("[fe80::1%lo]:80"); err == nil || !strings.Contains(err.Error(), "zone") {
		t.Fatalf("err = %v", err)
	}
}

func TestRules(t *testing.T) {
	rules, err := ParseRules([]string{"api.github.com:443", "*.githubusercontent.com:443", "10.0.0.5:*", "any.test:*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target string
		want   bool
	}{
		{"api.github.com:443", true},
		{"API.GitHub.com.:443", true},
		{"api.github.com:80", false},
		{"raw.githubusercontent.com:443", true},
		{"githubusercontent.com:443", false},
		{"evilgithubusercontent.com:443", false},
		{"10.0.0.5:22", true},
		{"10.0.0.6:22", false},
		{"any.test:8443", true},
		{"10.0.0.5.:22", true}, // the address, trailing dot or not
	} {
		tg, err := ParseTarget(tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		if got := rules.Admit(tg); got != tc.want {
			t.Errorf("Admit(%s) = %v, want %v", tc.target, got, tc.want)
		}
	}
}

// waitABit paces a poll for something another goroutine does.
func waitABit() { time.Sleep(10 * time.Millisecond) }

// TestProxyIdleExchangeEnds: a host that stops sending mid-body does not
// hold the proxy's connection for ever.
func TestProxyIdleExchangeEnds(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-release
	}))
	defer backend.Close()
	defer close(release) // before Close, which waits for the handler
	rules, _ := ParseRules([]string{backend.Listener.Addr().String()})
	ev := &events{}
	p := New(Options{Server: "srv", Rules: rules, Report: ev.add, IdleTimeout: 200 * time.Millisecond})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(l)
	defer p.Close()
	resp, err := proxyClient(l.Addr().String()).Get(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(resp.Body); done <- b }()
	select {
	case b := <-done:
		if string(b) != "partial" {
			t.Fatalf("body %q", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stalled exchange was not ended")
	}
	resp.Body.Close()
}
