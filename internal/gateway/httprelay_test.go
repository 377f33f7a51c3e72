package gateway

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// relayGateway serves a meta-mode gateway with a stdio upstream and two
// API keys (alice, bob) over HTTP; sdk takes the SDK's path for every
// call (no relay).
func relayGateway(t *testing.T, sdk bool, idle *float64) (*Gateway, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hash := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	cfg := &config.Config{
		Servers: map[string]*config.Server{"up": {Name: "up", Command: exe, Transport: config.TransportStdio,
			Env: map[string]string{envStdioUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}},
		Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
		Auth:    &config.Auth{APIKeys: []config.APIKey{{Principal: "alice", SHA256: hash("alice-key")}, {Principal: "bob", SHA256: hash("bob-key")}}},
		HTTP:    config.HTTP{SessionIdleTimeout: idle},
	}
	g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), SDKCalls: sdk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	hs := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(hs.Close)
	return g, hs.URL + "/mcp"
}

// post sends body to url with the headers a streamable HTTP client sends
// (key as bearer token, session), then edit's changes; it returns the
// status, the JSON-RPC message or error text of the answer, and its
// content type.
func post(t *testing.T, url, key, session, body string, edit func(http.Header)) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		// The SDK answers a call on an SSE stream: its one message.
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return resp.StatusCode, d, ct
			}
		}
		return resp.StatusCode, "", ct
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), ct
}

// openAs initializes a session as key's principal.
func openAs(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	if code, body, _ := post(t, url, key, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return id
}

const relayCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call_tool","arguments":{"tool_name":"up__echo","arguments":{"m":1}}}}`

// Whatever the SDK handler refuses or serves itself, the relay leaves to
// it: each request gets the same status and answer from a gateway with
// the relay as from one without, and only the plain calls on the caller's
// own session are taken by the relay.
func TestHTTPRelayLeavesTheSDKWhatItRefuses(t *testing.T) {
	type result struct {
		code       int
		body       string
		peeled     bool
		contentTyp string
	}
	cases := []struct {
		name      string
		key       string
		session   string // "own", "other" (bob's), "unknown", ""
		body      string
		edit      func(http.Header)
		wantRelay bool
	}{
		{name: "plain call on one's own session", key: "alice-key", session: "own", body: relayCall, wantRelay: true},
		{name: "pretty-printed call", key: "alice-key", session: "own", body: "{\n \"jsonrpc\": \"2.0\", \"id\": \"s-1\",\n \"method\": \"tools/call\",\n \"params\": {\"name\": \"call_tool\", \"arguments\": {\"tool_name\": \"up__echo\"}}\n}", wantRelay: true},
		{name: "no version header", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Del("Mcp-Protocol-Version") }, wantRelay: true},
		{name: "another principal's session", key: "bob-key", session: "own", body: relayCall},
		{name: "no token", key: "", session: "own", body: relayCall},
		{name: "a wrong token", key: "mallory-key", session: "own", body: relayCall},
		{name: "unknown session", key: "alice-key", session: "unknown", body: relayCall},
		{name: "no session", key: "alice-key", session: "", body: relayCall},
		{name: "accepts JSON only", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Accept", "application/json") }},
		{name: "accepts SSE only", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Accept", "text/event-stream") }},
		{name: "not JSON", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Content-Type", "text/plain") }},
		{name: "unsupported version header", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Mcp-Protocol-Version", "1999-01-01") }},
		{name: "other supported version header", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-06-18") }},
		{name: "resuming a stream", key: "alice-key", session: "own", body: relayCall, edit: func(h http.Header) { h.Set("Last-Event-ID", "x_1") }},
		{name: "batch", key: "alice-key", session: "own", body: "[" + relayCall + "]"},
		{name: "progress token", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"call_tool","arguments":{"tool_name":"up__echo"},"_meta":{"progressToken":"p"}}}`},
		{name: "duplicate key", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search_tools","name":"call_tool","arguments":{"tool_name":"up__echo"}}}`},
		{name: "escaped key", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"na\u006de":"call_tool","arguments":{"tool_name":"up__echo"}}}`},
		{name: "a meta-tool of its own", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"echo"}}}`},
		{name: "notification", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"call_tool","arguments":{}}}`},
		{name: "invalid JSON", key: "alice-key", session: "own", body: `{"jsonrpc":"2.0","id":12,"method":"tools/call",`},
	}
	run := func(sdk bool) []result {
		g, url := relayGateway(t, sdk, nil)
		own := openAs(t, url, "alice-key")
		out := make([]result, len(cases))
		for i, c := range cases {
			session := map[string]string{"own": own, "unknown": "NOSUCHSESSION", "": ""}[c.session]
			before := g.httpPeeled.Load()
			code, body, ct := post(t, url, c.key, session, c.body, c.edit)
			out[i] = result{code: code, body: body, peeled: g.httpPeeled.Load() != before, contentTyp: ct}
		}
		return out
	}
	sdk, relay := run(true), run(false)
	for i, c := range cases {
		s, r := sdk[i], relay[i]
		if s.code != r.code || s.body != r.body {
			t.Errorf("%s: the relay answered %d %s; the SDK %d %s", c.name, r.code, r.body, s.code, s.body)
		}
		if r.peeled != c.wantRelay || s.peeled {
			t.Errorf("%s: taken by the relay: %v (without it: %v); want %v", c.name, r.peeled, s.peeled, c.wantRelay)
		}
		if r.peeled && r.contentTyp != "application/json" {
			t.Errorf("%s: the relay answered as %q", c.name, r.contentTyp)
		}
	}
	if sdk[3].code != http.StatusForbidden || !strings.Contains(sdk[3].body, "session user mismatch") {
		t.Errorf("bob on alice's session: %d %s; want 403 session user mismatch", sdk[3].code, sdk[3].body)
	}
}

// A session used only for calls the relay answers is in use, not idle:
// the idle timeout must not close it, and must still close it once the
// calls stop.
func TestHTTPRelayKeepsItsSessionAlive(t *testing.T) {
	idle := 0.3
	g, url := relayGateway(t, false, &idle)
	id := openAs(t, url, "alice-key")
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body, _ := post(t, url, "alice-key", id, relayCall, nil); code != http.StatusOK {
			t.Fatalf("a call on a session in use: %d %s", code, body)
		}
	}
	if g.httpPeeled.Load() == 0 {
		t.Fatal("the relay took no call")
	}
	// Watched without a request of its own, which would keep it alive.
	for deadline := time.Now().Add(10 * time.Second); g.httpSessions.Load().lookup(id) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an idle session was never closed")
		}
	}
	if code, body, _ := post(t, url, "alice-key", id, relayCall, nil); code != http.StatusNotFound {
		t.Errorf("a call on the closed session: %d %s; want 404", code, body)
	}
}

// A client that goes away cancels the call the relay is serving (the SDK's
// stateful handler lets it run on), as do the client's cancellation and
// the end of its session.
func TestHTTPRelayCancelsWithTheClient(t *testing.T) {
	g, url := relayGateway(t, false, nil)
	id := openAs(t, url, "alice-key")
	if code, body, _ := post(t, url, "alice-key", id, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"waits until cancelled"}}}`, nil); code != http.StatusOK || !strings.Contains(body, "up__waits") {
		t.Fatalf("search_tools: %d %s", code, body)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"call_tool","arguments":{"tool_name":"up__waits"}}}`
	// Allowed calls, and calls that ended (with any outcome), so far.
	allowed := func() float64 { return metricSum(t, g, "toolgate_call_decisions_total{", `action="allow"`) }
	ended := func() float64 { return metricSum(t, g, "toolgate_tool_calls_total{", "") }

	// send posts the call until ctx ends; done is closed when it has.
	send := func(ctx context.Context) (done chan struct{}) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-key")
		req.Header.Set("Mcp-Session-Id", id)
		done = make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		return done
	}

	// The client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	done := send(ctx)
	waitFor(t, "the call to reach the upstream", func() bool { return allowed() == 1 })
	if ended() != 0 || g.httpPeeled.Load() != 0 {
		t.Fatalf("the call ended (%v) or was answered (%d) before its client went away", ended(), g.httpPeeled.Load())
	}
	cancel()
	<-done
	waitFor(t, "the call to end when its client went away", func() bool { return ended() == 1 })

	// The client cancels the call (notifications/cancelled).
	done = send(context.Background())
	waitFor(t, "the second call to reach the upstream", func() bool { return allowed() == 2 })
	if code, body, _ := post(t, url, "alice-key", id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"changed my mind"}}`, nil); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, body)
	}
	waitFor(t, "the call to end when its client cancelled it", func() bool { return ended() == 2 })
	<-done

	// The session ends (DELETE) with a call in flight.
	done = send(context.Background())
	waitFor(t, "the third call to reach the upstream", func() bool { return allowed() == 3 })
	del, _ := http.NewRequest(http.MethodDelete, url, nil)
	del.Header.Set("Authorization", "Bearer alice-key")
	del.Header.Set("Mcp-Session-Id", id)
	if resp, err := http.DefaultClient.Do(del); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	waitFor(t, "the call to end with its session", func() bool { return ended() == 3 })
	<-done
}

// metricSum adds up the values of g's metric lines that start with
// prefix and contain label.
func metricSum(t *testing.T, g *Gateway, prefix, label string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	g.metrics.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var sum float64
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, label) {
			f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			sum += f
		}
	}
	return sum
}

// waitFor waits until cond holds; what is the wait's subject, for the
// failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited in vain for %s", what)
		}
	}
}
