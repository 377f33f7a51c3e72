package llmproxy

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
)

func blockSendEmail() *Proxy {
	p, _ := New(Options{Config: &config.LLMProxy{}, Evaluator: EvaluatorFunc(func(_ context.Context, c Call) Decision {
		if c.Name == "send_email" {
			return Decision{Action: Block, Rule: "r", Reason: "no"}
		}
		return Decision{Action: Allow}
	})})
	return p
}

func seedFixtures(f *testing.F, ext string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*"+ext))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		api := strings.SplitN(filepath.Base(file), "_", 2)[0]
		f.Add(api, string(b))
	}
}

// anthropicToolStarts returns the names of the tool_use blocks an
// Anthropic client would see start in an SSE body.
func anthropicToolStarts(body string) []string {
	r := newSSEReader(strings.NewReader(body), 1<<30)
	var names []string
	for {
		e, err := r.next()
		if err != nil {
			return names
		}
		// Exact keys, last duplicate wins: how JSON.parse reads it.
		var ev, cb obj
		if json.Unmarshal(e.data, &ev) != nil {
			continue
		}
		_ = json.Unmarshal(ev["content_block"], &cb)
		if str(ev, "type") == "content_block_start" && str(cb, "type") == "tool_use" {
			names = append(names, str(cb, "name"))
		}
		var m obj
		_ = json.Unmarshal(ev["message"], &m)
		var content []obj
		_ = json.Unmarshal(m["content"], &content)
		for _, b := range content {
			if str(ev, "type") == "message_start" && str(b, "type") == "tool_use" {
				names = append(names, str(b, "name"))
			}
		}
	}
}

// FuzzStream: any stream is rewritten without panicking, and no
// send_email tool_use block ever starts in what an Anthropic client gets.
func FuzzStream(f *testing.F) {
	seedFixtures(f, ".sse")
	p := blockSendEmail()
	f.Fuzz(func(t *testing.T, api, body string) {
		kind := map[string]string{"anthropic": apiMessages, "chat": apiChat, "responses": apiResponses}[api]
		if kind == "" {
			kind = apiMessages
		}
		w := httptest.NewRecorder()
		p.stream(context.Background(), w, strings.NewReader(body), "x", kind, &requestInfo{})
		if kind == apiMessages {
			for _, n := range anthropicToolStarts(w.Body.String()) {
				if n == "send_email" {
					t.Fatalf("a blocked tool_use reached the client:\n%s", w.Body.String())
				}
			}
		}
	})
}

// FuzzRewrite: any buffered body is rewritten or refused without
// panicking, and an Anthropic message that parses has no send_email
// tool_use left.
func FuzzRewrite(f *testing.F) {
	seedFixtures(f, ".json")
	p := blockSendEmail()
	f.Fuzz(func(t *testing.T, api, body string) {
		kind := map[string]string{"anthropic": apiMessages, "chat": apiChat, "responses": apiResponses}[api]
		if kind == "" {
			kind = apiMessages
		}
		out, err := p.rewrite(context.Background(), "x", kind, &requestInfo{}, []byte(body))
		if err != nil || kind != apiMessages {
			return
		}
		var msg obj
		if json.Unmarshal(out, &msg) != nil {
			return
		}
		var content []obj
		_ = json.Unmarshal(msg["content"], &content)
		for _, b := range content {
			if str(b, "type") == "tool_use" && str(b, "name") == "send_email" {
				t.Fatalf("a blocked tool_use is left:\n%s", out)
			}
		}
	})
}

// TestExactKeys: keys differing only in case, which encoding/json's struct
// decoding would match but JSON.parse keeps apart, cannot disguise a
// blocked call; nor can an escaped key.
func TestExactKeys(t *testing.T) {
	p := blockSendEmail()
	cases := []struct{ api, body, leak string }{
		{apiMessages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"send_email\",\"Name\":\"get_weather\",\"input\":{}}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n", `"name":"send_email"`},
		{apiMessages, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool\\u005fuse\",\"id\":\"t\",\"name\":\"send_email\",\"input\":{}}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n", `"name":"send_email"`},
		{apiMessages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"send_email\",\"input\":{}}]}}\n\n", `"name":"send_email"`},
		{apiChat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"send_email\",\"Name\":\"get_weather\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", `send_email"`},
		{apiChat, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool\\u005fcalls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"send_email\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", `"name":"send_email"`},
		{apiResponses, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"send_email\",\"Name\":\"x\",\"arguments\":\"\"}}\n\n" +
			"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"send_email\",\"Name\":\"x\",\"arguments\":\"{}\"}}\n\n", `"name":"send_email"`},
	}
	for i, c := range cases {
		w := httptest.NewRecorder()
		p.stream(context.Background(), w, strings.NewReader(c.body), "x", c.api, &requestInfo{})
		if out := w.Body.String(); strings.Contains(out, c.leak) || !strings.Contains(out, "[toolgate] Tool 'send_email' blocked") {
			t.Errorf("case %d: the call was not blocked:\n%s", i, out)
		}
	}
}

// TestResponsesUnannouncedCall: a function_call that arrives only as an
// output_item.done (replacing an item the client holds) is judged too.
func TestResponsesUnannouncedCall(t *testing.T) {
	p := blockSendEmail()
	body := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"m\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"send_email\",\"arguments\":\"{}\"}}\n\n"
	w := httptest.NewRecorder()
	p.stream(context.Background(), w, strings.NewReader(body), "x", apiResponses, &requestInfo{})
	if out := w.Body.String(); strings.Contains(out, `"name":"send_email"`) || !strings.Contains(out, "blocked") {
		t.Errorf("an unannounced call was not judged:\n%s", out)
	}
	w = httptest.NewRecorder()
	p.stream(context.Background(), w, strings.NewReader("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"send_email\",\"arguments\":\"{}\"}}\n\n"), "x", apiResponses, &requestInfo{})
	if out := w.Body.String(); strings.Contains(out, "send_email") {
		t.Errorf("a call without output_index passed:\n%s", out)
	}
}

// TestChatLegacyFunctionCall: the deprecated function_call (one call per
// message, before tool_calls) is judged, buffered and streamed.
func TestChatLegacyFunctionCall(t *testing.T) {
	p := blockSendEmail()
	buf := `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"send_email","arguments":"{\"to\":\"bob@x\"}"}},"finish_reason":"function_call"}]}`
	out, err := p.rewrite(context.Background(), "x", apiChat, &requestInfo{}, []byte(buf))
	if err != nil || strings.Contains(string(out), "function_call\":{") || !strings.Contains(string(out), `"finish_reason":"stop"`) || !strings.Contains(string(out), "blocked") {
		t.Errorf("buffered function_call not blocked: %v\n%s", err, out)
	}
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"function_call\":{\"name\":\"send_email\",\"arguments\":\"\"}},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"function_call\":{\"arguments\":\"{\\\"to\\\":\\\"bob@x\\\"}\"}},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"function_call\"}]}\n\ndata: [DONE]\n\n"
	w := httptest.NewRecorder()
	p.stream(context.Background(), w, strings.NewReader(stream), "x", apiChat, &requestInfo{})
	if s := w.Body.String(); strings.Contains(s, "function_call\":{") || strings.Contains(s, "bob@x") || !strings.Contains(s, `"finish_reason":"stop"`) {
		t.Errorf("streamed function_call not blocked:\n%s", s)
	}
}

// TestWithholdResults: the named results are replaced in each request
// shape, the others and the rest of the body kept.
func TestWithholdResults(t *testing.T) {
	w := map[string]string{"bad": "WITHHELD"}
	cases := []struct{ api, body string }{
		{apiMessages, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"bad","content":"EVIL"},{"type":"tool_result","tool_use_id":"ok","content":"fine"}]}]}`},
		{apiChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"bad","content":"EVIL"},{"role":"tool","tool_call_id":"ok","content":"fine"}]}`},
		{apiResponses, `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"bad","output":"EVIL"},{"type":"function_call_output","call_id":"ok","output":"fine"}]}`},
	}
	for _, c := range cases {
		out, err := withholdResults(c.api, []byte(c.body), w)
		if err != nil {
			t.Fatalf("%s: %v", c.api, err)
		}
		s := string(out)
		if strings.Contains(s, "EVIL") || !strings.Contains(s, "WITHHELD") || !strings.Contains(s, "fine") || !strings.Contains(s, `"model":"m"`) {
			t.Errorf("%s: %s", c.api, s)
		}
		info, err := parseRequest("x", c.api, out)
		if err != nil || len(info.results) != 2 {
			t.Errorf("%s: the rewritten request does not parse back: %v %+v", c.api, err, info.results)
		}
	}
}

// FuzzRequest: any request body is read without panicking, and withholding
// a result it names leaves none of that result's text behind.
func FuzzRequest(f *testing.F) {
	f.Add("anthropic", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"EVIL"}]}],"tools":[{"name":"t","input_schema":{}}]}`)
	f.Add("chat", `{"messages":[{"role":"tool","tool_call_id":"a","content":"EVIL"}],"tools":[{"type":"function","function":{"name":"t"}}]}`)
	f.Add("responses", `{"input":[{"type":"function_call_output","call_id":"a","output":"EVIL"}]}`)
	f.Add("responses", `{"input":"hello"}`)
	f.Fuzz(func(t *testing.T, api, body string) {
		kind := map[string]string{"anthropic": apiMessages, "chat": apiChat, "responses": apiResponses}[api]
		if kind == "" {
			kind = apiMessages
		}
		info, err := parseRequest("x", kind, []byte(body))
		if err != nil {
			return
		}
		w := map[string]string{}
		for _, r := range info.results {
			if r.CallID != "" && r.Text == "EVIL" {
				w[r.CallID] = "WITHHELD"
			}
		}
		if len(w) == 0 {
			return
		}
		out, err := withholdResults(kind, []byte(body), w)
		if err != nil {
			return
		}
		again, err := parseRequest("x", kind, out)
		if err != nil {
			t.Fatalf("the rewritten body does not parse: %v\n%s", err, out)
		}
		for _, r := range again.results {
			if _, named := w[r.CallID]; named && r.Text == "EVIL" {
				t.Fatalf("a withheld result is still there:\n%s", out)
			}
		}
	})
}

// TestChatSplitName: a tool name split over chunks ("send_" then "email")
// is the last fragment to one SDK and the whole to another; a block of
// either blocks the call.
func TestChatSplitName(t *testing.T) {
	p := blockSendEmail()
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"send_\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"email\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	w := httptest.NewRecorder()
	p.stream(context.Background(), w, strings.NewReader(stream), "x", apiChat, &requestInfo{})
	if s := w.Body.String(); strings.Contains(s, `"name":"send_"`) || !strings.Contains(s, `"finish_reason":"stop"`) {
		t.Errorf("a split name passed:\n%s", s)
	}
}
