package llmproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/llmproxy"
	"github.com/toolgate/toolgate/internal/llmproxy/llmtest"
)

// judge blocks send_email and records what it was asked.
type judge struct {
	mu    sync.Mutex
	calls []llmproxy.Call
}

func (j *judge) EvaluateLLMCall(_ context.Context, c llmproxy.Call) llmproxy.Decision {
	j.mu.Lock()
	j.calls = append(j.calls, c)
	j.mu.Unlock()
	if c.Name == "send_email" {
		return llmproxy.Decision{Action: llmproxy.Block, Rule: "access_control.deny", Reason: "this tool is not available through this gateway"}
	}
	return llmproxy.Decision{Action: llmproxy.Allow}
}

func setup(t *testing.T) (proxyURL string, prov *llmtest.Provider, j *judge) {
	t.Helper()
	prov = &llmtest.Provider{Dir: llmtest.Dir()}
	up := httptest.NewServer(prov)
	t.Cleanup(up.Close)
	cfg := &config.LLMProxy{Providers: map[string]config.LLMProvider{
		config.ProviderAnthropic: {BaseURL: up.URL}, config.ProviderOpenAI: {BaseURL: up.URL},
	}}
	j = &judge{}
	p, err := llmproxy.New(llmproxy.Options{Config: cfg, Evaluator: j})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL, prov, j
}

var endpoints = map[string]string{"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}

func request(api, scenario string, stream bool) []byte {
	tools := map[string]any{
		"anthropic": []any{map[string]any{"name": "send_email", "description": "Send an email", "input_schema": map[string]any{"type": "object"}}},
		"chat":      []any{map[string]any{"type": "function", "function": map[string]any{"name": "send_email", "description": "Send an email", "parameters": map[string]any{"type": "object"}}}},
		"responses": []any{map[string]any{"type": "function", "name": "send_email", "description": "Send an email", "parameters": map[string]any{"type": "object"}}},
	}[api]
	body := map[string]any{"model": "m", "stream": stream, "tools": tools, "max_tokens": 100}
	if api == "responses" {
		body["input"] = scenario
	} else {
		body["messages"] = []any{map[string]any{"role": "user", "content": scenario}}
	}
	b, _ := json.Marshal(body)
	return b
}

func post(t *testing.T, url, api, scenario string, stream bool) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+endpoints[api], bytes.NewReader(request(api, scenario, stream)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-SECRET")
	req.Header.Set("Authorization", "Bearer sk-SECRET")
	req.Header.Set("X-Toolgate-Session", "conv-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestRewrite runs every fixture through the proxy, buffered and streamed,
// and checks the blocked call (send_email to bob@example.com) is gone, its
// line is there, the stop reason follows the reference's table, and
// responses without a blocked call pass byte for byte.
func TestRewrite(t *testing.T) {
	url, _, j := setup(t)
	for _, api := range []string{"anthropic", "chat", "responses"} {
		for _, sc := range []string{"text", "allowed", "tool", "parallel"} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", api, sc, stream), func(t *testing.T) {
					resp, got := post(t, url, api, sc, stream)
					if resp.StatusCode != 200 {
						t.Fatalf("status %d: %s", resp.StatusCode, got)
					}
					ext := ".json"
					if stream {
						ext = ".sse"
					}
					orig, err := os.ReadFile(filepath.Join(llmtest.Dir(), api+"_"+sc+ext))
					if err != nil {
						t.Fatal(err)
					}
					if sc == "text" || sc == "allowed" {
						if !bytes.Equal(got, orig) {
							t.Fatalf("a response with nothing blocked was changed:\n%s", got)
						}
						return
					}
					s := string(got)
					for _, leak := range []string{`"name":"send_email"`, `bob@example.com`, `"name": "send_email"`} {
						if strings.Contains(s, leak) {
							t.Errorf("blocked call leaked (%s):\n%s", leak, s)
						}
					}
					if !strings.Contains(s, "[toolgate] Tool 'send_email' blocked by access_control.deny: this tool is not available through this gateway") {
						t.Errorf("no blocked line:\n%s", s)
					}
					all := sc == "tool"
					switch api {
					case "anthropic":
						wantStop := `"stop_reason":"tool_use"`
						if all {
							wantStop = `"stop_reason":"end_turn"`
						}
						if !strings.Contains(strings.ReplaceAll(s, `": "`, `":"`), wantStop) {
							t.Errorf("want %s:\n%s", wantStop, s)
						}
						if !all && !strings.Contains(s, `get_weather`) {
							t.Errorf("the allowed call is missing:\n%s", s)
						}
					case "chat":
						want := `"finish_reason":"tool_calls"`
						if all {
							want = `"finish_reason":"stop"`
						}
						if !strings.Contains(strings.ReplaceAll(s, `": "`, `":"`), want) {
							t.Errorf("want %s:\n%s", want, s)
						}
						if !all && !strings.Contains(s, `get_weather`) {
							t.Errorf("the allowed call is missing:\n%s", s)
						}
					case "responses":
						if !all && !strings.Contains(s, `get_weather`) {
							t.Errorf("the allowed call is missing:\n%s", s)
						}
					}
				})
			}
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range j.calls {
		if c.Session != "conv-1" {
			t.Errorf("call %s judged in session %q, want the header's conv-1", c.Name, c.Session)
		}
		if c.Name == "send_email" && (c.Arguments["to"] != "bob@example.com" || c.Def == nil || c.Def.Description != "Send an email") {
			t.Errorf("send_email judged with arguments %v def %+v; want the full arguments and the request's definition", c.Arguments, c.Def)
		}
	}
}

// TestPassThrough: API keys reach the provider untouched, the session
// header does not, and errors come back as the provider sent them.
func TestPassThrough(t *testing.T) {
	url, prov, _ := setup(t)
	resp, body := post(t, url, "anthropic", "ratelimit", false)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "0" || !strings.Contains(string(body), "rate_limit_error") {
		t.Errorf("429 not relayed: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	seen := prov.Last()
	if seen.Header.Get("X-Api-Key") != "sk-ant-SECRET" || seen.Header.Get("Authorization") != "Bearer sk-SECRET" {
		t.Errorf("API key headers not passed through: %v", seen.Header)
	}
	if seen.Header.Get("X-Toolgate-Session") != "" {
		t.Error("the session header reached the provider")
	}
	resp, body = post(t, url, "chat", "error", true)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "invalid_request_error") {
		t.Errorf("400 not relayed: %d %s", resp.StatusCode, body)
	}
}

// TestDisconnect: a stream that breaks off inside a tool call delivers
// nothing of that call.
func TestDisconnect(t *testing.T) {
	url, _, _ := setup(t)
	for _, api := range []string{"anthropic", "chat", "responses"} {
		req, _ := http.NewRequest("POST", url+endpoints[api], bytes.NewReader(request(api, llmtest.ScenarioDisconnect, true)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "bob@") || strings.Contains(string(b), `"name":"send_email"`) {
			t.Errorf("%s: a call cut off mid-stream reached the client:\n%s", api, b)
		}
	}
}

// TestOtherEndpoints: a path the proxy does not inspect (a GET of the
// model list) is relayed to the provider the headers name, without a body.
func TestOtherEndpoints(t *testing.T) {
	url, prov, _ := setup(t)
	req, _ := http.NewRequest("GET", url+"/v1/models?limit=2", nil)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen := prov.Last()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"data":[]`) || seen.Path != "/v1/models" || len(seen.Body) != 0 || len(seen.TransferEncoding) > 0 {
		t.Errorf("GET /v1/models: %d %s; provider saw %s %q %v", resp.StatusCode, b, seen.Path, seen.Body, seen.TransferEncoding)
	}
}
