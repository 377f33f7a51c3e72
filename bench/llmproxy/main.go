// Command llmproxy measures what toolgate's LLM proxy adds to a streamed
// LLM response: a 2,000-event Anthropic Messages stream (a text block of
// 1,990 text_delta events, then a get_weather tool_use block, shaped as the
// API documents it) is served by a local fake provider and read directly
// and through the proxy, alternating A/B. The proxy runs on the real
// gateway (filters from the config below), so the tool call at the end is
// judged by the real pipeline. It prints time to first byte (p50/p99 of
// each path and the difference) and CPU per streamed event (getrusage of
// the whole process — client, provider and proxy — for each path, so the
// difference is the proxy's share).
//
//	go run ./bench/llmproxy [-n 300] [-events 2000] [-api messages|chat]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/toolgate/toolgate/extensions/all"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/llmproxy"
)

func main() {
	n := flag.Int("n", 300, "streams per path")
	events := flag.Int("events", 2000, "events per stream")
	api := flag.String("api", "messages", `"messages" (Anthropic) or "chat" (OpenAI Chat Completions)`)
	flag.Parse()
	if err := run(*n, *events, *api); err != nil {
		log.Fatal(err)
	}
}

// recording is the stream the provider replays, event by event.
func recording(events int, api string) [][]byte {
	var out [][]byte
	add := func(name string, v any) {
		b, _ := json.Marshal(v)
		if name == "" {
			out = append(out, []byte("data: "+string(b)+"\n\n"))
			return
		}
		out = append(out, []byte("event: "+name+"\ndata: "+string(b)+"\n\n"))
	}
	words := strings.Fields("The forecast for San Francisco shows fog in the morning clearing by noon with a high of 19 degrees and light winds from the west")
	args := `{"location": "San Francisco, CA", "unit": "celsius"}`
	if api == "chat" {
		chunk := func(delta map[string]any, fr any) map[string]any {
			return map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1741570283, "model": "gpt-4o",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": fr}}}
		}
		add("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for i := 0; len(out) < events-9; i++ {
			add("", chunk(map[string]any{"content": words[i%len(words)] + " "}, nil))
		}
		add("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_bench", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": ""}}}}, nil))
		for i := 0; i < len(args); i += 10 {
			add("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[i:min(i+10, len(args))]}}}}, nil))
		}
		add("", chunk(map[string]any{}, "tool_calls"))
		out = append(out, []byte("data: [DONE]\n\n"))
		return out
	}
	add("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 25, "output_tokens": 1}}})
	add("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for i := 0; len(out) < events-11; i++ {
		add("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": words[i%len(words)] + " "}})
	}
	add("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	add("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_bench", "name": "get_weather", "input": map[string]any{}}})
	for i := 0; i < len(args); i += 10 {
		add("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": args[i:min(i+10, len(args))]}})
	}
	add("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
	add("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 2000}})
	add("message_stop", map[string]any{"type": "message_stop"})
	return out
}

func run(n, events int, api string) error {
	rec := recording(events, api)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, e := range rec {
			if _, err := w.Write(e); err != nil {
				return
			}
			_ = rc.Flush() // one write per event, as providers stream
		}
	}))
	defer provider.Close()

	state, err := os.MkdirTemp("", "toolgate-bench-llm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	raw := []byte(fmt.Sprintf(`{"mcpServers": {}, "filters": {"access_control": {"deny": ["mail__send_email"]}, "cross_server": {}},
		"audit": {"enabled": true}, "search": {"mode": "lexical"},
		"llm_proxy": {"providers": {"anthropic": {"base_url": %q}, "openai": {"base_url": %q}}, "tools": {"get_weather": "weather", "send_email": "mail"}}}`, provider.URL, provider.URL))
	cfg, err := config.Parse(raw, "bench.json", nil)
	if err != nil {
		return err
	}
	ctx := context.Background()
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, StateDir: state, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer g.Close()
	insp, err := g.LLMInspector()
	if err != nil {
		return err
	}
	p, err := llmproxy.New(llmproxy.Options{Config: cfg.LLMProxy, Evaluator: g, Inspector: insp})
	if err != nil {
		return err
	}
	proxy := httptest.NewServer(p)
	defer proxy.Close()

	path := "/v1/messages"
	if api == "chat" {
		path = "/v1/chat/completions"
	}
	body := []byte(`{"model":"m","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"weather in SF?"}],"tools":[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object"}}]}`)
	if api == "chat" {
		body = []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"weather in SF?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object"}}}]}`)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var want []byte
	for _, e := range rec {
		want = append(want, e...)
	}
	// one streams a response and returns its time to first body byte.
	// The "relay" path is the proxy on an endpoint it does not inspect:
	// the same hop and HTTP client, bytes copied as they come; what one
	// more HTTP hop costs by itself.
	const relay = "relay"
	one := func(base string) (time.Duration, error) {
		target := base + path
		if base == relay {
			target = proxy.URL + "/v1/relay"
		}
		req, _ := http.NewRequest("POST", target, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "sk-bench")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var first [1]byte
		if _, err := io.ReadFull(resp.Body, first[:]); err != nil {
			return 0, err
		}
		ttfb := time.Since(start)
		rest, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		got := append(first[:], rest...)
		if !bytes.Equal(got, want) {
			return 0, fmt.Errorf("%s: the stream differs from the recording (%d vs %d bytes): ...%s", base, len(got), len(want), got[max(0, len(got)-700):])
		}
		return ttfb, nil
	}
	// Warm up every path (connections, the pin of get_weather).
	for range 20 {
		for _, base := range []string{provider.URL, relay, proxy.URL} {
			if _, err := one(base); err != nil {
				return err
			}
		}
	}
	var direct, hop, proxied []time.Duration
	var cpuDirect, cpuHop, cpuProxied time.Duration
	for i := range 3 * n {
		base, list, cpu := provider.URL, &direct, &cpuDirect
		switch i % 3 {
		case 1:
			base, list, cpu = relay, &hop, &cpuHop
		case 2:
			base, list, cpu = proxy.URL, &proxied, &cpuProxied
		}
		before := cpuTime()
		d, err := one(base)
		if err != nil {
			return err
		}
		*cpu += cpuTime() - before
		*list = append(*list, d)
	}
	pct := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	fmt.Printf("%s stream: %d events (%d bytes), %d streams per path, paths interleaved\n", api, len(rec), len(want), n)
	ev := float64(n * len(rec))
	perEvent := func(c time.Duration) float64 { return float64(c.Nanoseconds()) / ev / 1e3 }
	fmt.Printf("%-34s %10s %10s %16s\n", "path", "TTFB p50", "TTFB p99", "CPU per event")
	for _, r := range []struct {
		name string
		d    []time.Duration
		cpu  time.Duration
	}{{"direct", direct, cpuDirect}, {"proxy, uninspected relay", hop, cpuHop}, {"toolgate llm proxy", proxied, cpuProxied}} {
		fmt.Printf("%-34s %10s %10s %13.2f µs\n", r.name, pct(r.d, .5).Round(time.Microsecond), pct(r.d, .99).Round(time.Microsecond), perEvent(r.cpu))
	}
	fmt.Printf("toolgate vs direct:               TTFB p50 %+s, CPU per event %+.2f µs\n", (pct(proxied, .5) - pct(direct, .5)).Round(time.Microsecond), perEvent(cpuProxied)-perEvent(cpuDirect))
	fmt.Printf("toolgate vs uninspected relay:    TTFB p50 %+s, CPU per event %+.2f µs (%+.1f%%)\n", (pct(proxied, .5) - pct(hop, .5)).Round(time.Microsecond),
		perEvent(cpuProxied)-perEvent(cpuHop), 100*(perEvent(cpuProxied)-perEvent(cpuHop))/perEvent(cpuHop))
	return nil
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
