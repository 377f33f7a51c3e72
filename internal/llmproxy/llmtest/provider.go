// Package llmtest is a fake LLM provider for tests: it serves the Anthropic
// Messages and OpenAI Chat Completions and Responses endpoints by replaying
// the spec-shaped fixtures in internal/llmproxy/testdata, chosen by the
// conversation's first user message ("tool", "parallel", ...), buffered or
// streamed as the request asks.
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Dir is the fixtures folder.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Scenarios served by name besides the fixtures.
const (
	ScenarioError      = "error"      // 400 in the provider's error shape
	ScenarioRateLimit  = "ratelimit"  // 429 with retry-after
	ScenarioDisconnect = "disconnect" // a stream that stops mid-call
)

// Provider is the fake. Seen records what reached it, for tests that check
// headers passed through.
type Provider struct {
	Dir string

	mu       sync.Mutex
	Requests []Seen
}

// Seen is one request the provider received.
type Seen struct {
	Path             string
	Header           http.Header
	TransferEncoding []string
	Body             []byte
}

// Count is how many requests the provider received.
func (p *Provider) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.Requests)
}

// Last returns the last request received.
func (p *Provider) Last() Seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.Requests) == 0 {
		return Seen{}
	}
	return p.Requests[len(p.Requests)-1]
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	p.mu.Lock()
	p.Requests = append(p.Requests, Seen{Path: r.URL.Path, Header: r.Header.Clone(), TransferEncoding: r.TransferEncoding, Body: body.Bytes()})
	p.mu.Unlock()
	var prefix string
	switch r.URL.Path {
	case "/v1/messages":
		prefix = "anthropic"
	case "/v1/chat/completions":
		prefix = "chat"
	case "/v1/responses":
		prefix = "responses"
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
		return
	}
	var req struct {
		Stream   bool              `json:"stream"`
		Messages []json.RawMessage `json:"messages"`
		Input    json.RawMessage   `json:"input"`
	}
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	name := scenario(prefix, req.Messages, req.Input)
	switch name {
	case ScenarioError:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		if prefix == "anthropic" {
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"messages: at least one message is required"}}`))
		} else {
			_, _ = w.Write([]byte(`{"error":{"message":"Invalid value for 'model'.","type":"invalid_request_error","param":"model","code":null}}`))
		}
		return
	case ScenarioRateLimit:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
		w.Header().Set("X-Fake-Limit", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		if prefix == "anthropic" {
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`))
		} else {
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
		}
		return
	}
	fixture := name
	if name == ScenarioDisconnect {
		fixture = "parallel"
	}
	ext := ".json"
	if req.Stream {
		ext = ".sse"
	}
	data, err := os.ReadFile(filepath.Join(p.Dir, prefix+"_"+fixture+ext))
	if err != nil {
		http.Error(w, fmt.Sprintf("no fixture %q", prefix+"_"+fixture+ext), http.StatusNotFound)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_fake_1")
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	events := bytes.SplitAfter(data, []byte("\n\n"))
	if name == ScenarioDisconnect {
		// Stop inside the last tool call: its arguments are incomplete.
		events = events[:len(events)*3/4]
	}
	rc := http.NewResponseController(w)
	for _, e := range events {
		if _, err := w.Write(e); err != nil {
			return
		}
		_ = rc.Flush()
		if name == ScenarioDisconnect {
			time.Sleep(time.Millisecond)
		}
	}
	if name == ScenarioDisconnect {
		// Abort the connection instead of ending the response cleanly.
		panic(http.ErrAbortHandler)
	}
}

// scenario is the first user message's text, or "text" (a final answer)
// when the agent is sending tool results back.
func scenario(prefix string, msgs []json.RawMessage, input json.RawMessage) string {
	if prefix == "responses" {
		var s string
		if json.Unmarshal(input, &s) == nil {
			return strings.TrimSpace(s)
		}
		_ = json.Unmarshal(input, &msgs)
	}
	if n := len(msgs); n > 0 {
		last := string(msgs[n-1])
		if strings.Contains(last, `"tool_result"`) || strings.Contains(last, `"function_call_output"`) || strings.Contains(last, `"role":"tool"`) {
			return "text"
		}
	}
	for _, raw := range msgs {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return strings.TrimSpace(s)
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" || b.Type == "input_text" {
				return strings.TrimSpace(b.Text)
			}
		}
	}
	return "text"
}
