package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTellingStderrLine(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"node", []string{"starting", "/srv/x.js:2", "throw new Error('boom');", "^", "", "Error: missing TOKEN", "    at Object.<anonymous> (/srv/x.js:2:7)", "    at Module._compile (node:internal)", "", "Node.js v22.3.0"}, "Error: missing TOKEN"},
		{"node esm", []string{"node:internal/errors:496", "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod'", "    at new NodeError", "Node.js v20.20.2"}, "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod'"},
		{"python", []string{"Traceback (most recent call last):", `  File "server.py", line 3, in <module>`, "    import mcp", "ModuleNotFoundError: No module named 'mcp'"}, "ModuleNotFoundError: No module named 'mcp'"},
		{"go", []string{"panic: runtime error: index out of range", "", "goroutine 1 [running]:", "main.main()", "\t/src/main.go:9 +0x1d", "exit status 2"}, "panic: runtime error: index out of range"},
		{"mention", []string{"loading config", "could not open db: failed to connect", "bye"}, "could not open db: failed to connect"},
		{"plain", []string{"one", "two"}, "two"},
		{"none", nil, ""},
	} {
		p := &process{}
		for _, l := range tt.lines {
			p.keep(l)
		}
		if got := p.telling(); got != tt.want {
			t.Errorf("%s: telling() = %q, want %q", tt.name, got, tt.want)
		}
	}
	// Bounded: lines and their length.
	p := &process{}
	p.keep("Error: " + strings.Repeat("x", 10*keepLineBytes))
	for range 3 * keepLines {
		p.keep("noise")
	}
	if len(p.lastLines) != keepLines {
		t.Fatalf("kept %d lines, want %d", len(p.lastLines), keepLines)
	}
	p = &process{}
	p.keep("Error: " + strings.Repeat("x", 10*keepLineBytes))
	if l := p.telling(); len(l) > keepLineBytes+8 {
		t.Fatalf("a kept line is %d bytes", len(l))
	}
}

// limited runs body through the response limit as the answer to a POST of
// request (or a GET when request is "") and returns what the SDK would
// read.
func limited(t *testing.T, limit int64, request, contentType, body string, withLength bool) (string, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if !withLength {
			w.(http.Flusher).Flush() // chunked
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	tr := &headerTransport{base: http.DefaultTransport, scheme: "http", host: strings.TrimPrefix(srv.URL, "http://"), server: "big", limit: limit, probe: &probe{}}
	var req *http.Request
	if request == "" {
		req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	} else {
		req, _ = http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(request))
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func wantTooLarge(t *testing.T, what, got, id string) {
	t.Helper()
	data := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(got, "event: message")), "data:"))
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("%s: not a JSON-RPC message: %q", what, got)
	}
	if string(m.ID) != id || !strings.Contains(m.Error.Message, `server "big"`) || !strings.Contains(m.Error.Message, "max_response_bytes") {
		t.Fatalf("%s: got %q, want an error for id %s naming the server and the limit", what, got, id)
	}
}

func TestResponseLimit(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`
	big := `{"jsonrpc":"2.0","id":7,"result":{"text":"` + strings.Repeat("a", 5000) + `"}}`
	small := `{"jsonrpc":"2.0","id":7,"result":{"text":"ok"}}`
	for _, withLength := range []bool{false, true} {
		got, err := limited(t, 4096, call, "application/json", small, withLength)
		if err != nil || got != small {
			t.Fatalf("small JSON (length %v): %q %v", withLength, got, err)
		}
		got, err = limited(t, 4096, call, "application/json", big, withLength)
		if err != nil {
			t.Fatal(err)
		}
		wantTooLarge(t, "big JSON", got, "7")
	}
	// A notification's oversized answer has no request to fail: an error.
	if _, err := limited(t, 4096, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "application/json", big, false); err == nil || !strings.Contains(err.Error(), `server "big"`) {
		t.Fatalf("oversized answer to a notification: %v", err)
	}

	// SSE on a POST: the oversized event answers the call and ends the stream.
	stream := "event: message\ndata: " + small + "\n\n" + "event: message\ndata: " + big + "\n\n" + "event: message\ndata: " + small + "\n\n"
	got, err := limited(t, 4096, call, "text/event-stream", stream, false)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitAfterN(got, "\n\n", 2)
	if parts[0] != "event: message\ndata: "+small+"\n\n" {
		t.Fatalf("the event under the limit was not passed as it was: %q", parts[0])
	}
	wantTooLarge(t, "big SSE event on a POST", parts[1], "7")

	// A standalone stream (legacy SSE): the id comes from the event's head
	// (Go SDK order) or its tail (TypeScript SDK order); the stream goes on.
	tsOrder := `{"result":{"text":"` + strings.Repeat("b", 5000) + `"},"jsonrpc":"2.0","id":"req-9"}`
	notif := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("c", 5000) + `"}}`
	stream = "event: endpoint\ndata: /message?s=1\n\n" + "data: " + big + "\n\n" + "event: message\ndata: " + tsOrder + "\n\n" + "data: " + notif + "\n\n" + "data: " + small + "\n\n"
	got, err = limited(t, 4096, "", "text/event-stream", stream, false)
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSuffix(got, "\n\n"), "\n\n")
	if len(events) != 4 || events[0] != "event: endpoint\ndata: /message?s=1" || events[3] != "data: "+small {
		t.Fatalf("standalone stream: got events %q", events)
	}
	wantTooLarge(t, "head id", events[1], "7")
	wantTooLarge(t, "tail id", events[2], `"req-9"`)
	if bytes.Contains([]byte(got), []byte("ccccc")) {
		t.Fatal("the oversized notification was passed on")
	}
}
