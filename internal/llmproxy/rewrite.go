package llmproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// obj is a JSON object whose unknown members survive a rewrite.
type obj = map[string]json.RawMessage

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values built here are marshalled
	}
	return b
}

func str(o obj, k string) string {
	var s string
	_ = json.Unmarshal(o[k], &s)
	return s
}

// rewrite judges the tool calls of a buffered response and rewrites those
// that are blocked. An unchanged response is returned as it came.
func (p *Proxy) rewrite(ctx context.Context, provider, api string, info *requestInfo, body []byte) ([]byte, error) {
	switch api {
	case apiMessages:
		return p.rewriteMessages(ctx, provider, info, body)
	case apiChat:
		return p.rewriteChat(ctx, provider, info, body)
	case apiResponses:
		return p.rewriteResponses(ctx, provider, info, body)
	}
	return body, nil
}

// rewriteMessages: a blocked tool_use block becomes a text block in place;
// when every tool_use was blocked, stop_reason tool_use becomes end_turn.
func (p *Proxy) rewriteMessages(ctx context.Context, provider string, info *requestInfo, body []byte) ([]byte, error) {
	var msg obj
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	if len(msg["content"]) > 0 {
		var content []obj
		if err := json.Unmarshal(msg["content"], &content); err != nil {
			return nil, fmt.Errorf("content: %v", err)
		}
	}
	uses, blocked, changed := p.judgeContent(ctx, provider, info, msg)
	if !changed {
		return body, nil
	}
	if blocked == uses && str(msg, "stop_reason") == "tool_use" {
		msg["stop_reason"] = mustJSON("end_turn")
	}
	return json.Marshal(msg)
}

// judgeContent judges the tool_use blocks of a message's content and turns
// the blocked ones into text blocks in place.
func (p *Proxy) judgeContent(ctx context.Context, provider string, info *requestInfo, msg obj) (uses, blocked int, changed bool) {
	var content []obj
	if json.Unmarshal(msg["content"], &content) != nil {
		return 0, 0, false
	}
	for i, b := range content {
		if str(b, "type") != "tool_use" {
			continue
		}
		uses++
		d := p.evaluate(ctx, provider, info, str(b, "id"), str(b, "name"), b["input"])
		if d.Action == Block {
			blocked++
			content[i] = obj{"type": mustJSON("text"), "text": mustJSON(blockedText(str(b, "name"), d))}
		}
	}
	if blocked > 0 {
		msg["content"] = mustJSON(content)
	}
	return uses, blocked, blocked > 0
}

// rewriteChat: blocked calls leave tool_calls and their lines are added to
// the message's content; when every call was blocked, tool_calls goes and
// finish_reason tool_calls becomes stop.
func (p *Proxy) rewriteChat(ctx context.Context, provider string, info *requestInfo, body []byte) ([]byte, error) {
	var resp obj
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	var choices []obj
	if err := json.Unmarshal(resp["choices"], &choices); err != nil && len(resp["choices"]) > 0 {
		return nil, fmt.Errorf("choices: %v", err)
	}
	changed := false
	for _, ch := range choices {
		var m obj
		if json.Unmarshal(ch["message"], &m) != nil {
			continue
		}
		var lines []string
		// The deprecated single function_call.
		var fc obj
		if json.Unmarshal(m["function_call"], &fc) == nil && fc != nil {
			if d := p.evaluate(ctx, provider, info, "", str(fc, "name"), fc["arguments"]); d.Action == Block {
				lines = append(lines, blockedText(str(fc, "name"), d))
				delete(m, "function_call")
				if str(ch, "finish_reason") == "function_call" {
					ch["finish_reason"] = mustJSON("stop")
				}
			}
		}
		var calls []obj
		_ = json.Unmarshal(m["tool_calls"], &calls)
		if len(calls) == 0 && len(lines) == 0 {
			continue
		}
		var kept []obj
		for _, c := range calls {
			var fn obj
			_ = json.Unmarshal(c["function"], &fn)
			name := str(fn, "name")
			d := p.evaluate(ctx, provider, info, str(c, "id"), name, fn["arguments"])
			if d.Action == Block {
				lines = append(lines, blockedText(name, d))
				continue
			}
			kept = append(kept, c)
		}
		if len(lines) == 0 {
			continue
		}
		changed = true
		m["content"] = mustJSON(joinText(str(m, "content"), lines))
		switch {
		case len(calls) == 0: // only a function_call
		case len(kept) == 0:
			delete(m, "tool_calls")
			if str(ch, "finish_reason") == "tool_calls" {
				ch["finish_reason"] = mustJSON("stop")
			}
		default:
			m["tool_calls"] = mustJSON(kept)
		}
		ch["message"] = mustJSON(m)
	}
	if !changed {
		return body, nil
	}
	resp["choices"] = mustJSON(choices)
	return json.Marshal(resp)
}

func joinText(existing string, lines []string) string {
	t := strings.Join(lines, "\n")
	if existing != "" {
		return existing + "\n" + t
	}
	return t
}

// rewriteResponses: a blocked function_call output item becomes an
// assistant message item in place.
func (p *Proxy) rewriteResponses(ctx context.Context, provider string, info *requestInfo, body []byte) ([]byte, error) {
	var resp obj
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	out, changed, err := p.rewriteOutput(ctx, provider, info, resp["output"], nil)
	if err != nil || !changed {
		return body, err
	}
	resp["output"] = out
	return json.Marshal(resp)
}

// rewriteOutput rewrites a Responses output array. decided, if not nil,
// holds the decisions already made for calls (by call_id) in a stream, so
// the final response agrees with the events without judging twice.
func (p *Proxy) rewriteOutput(ctx context.Context, provider string, info *requestInfo, raw json.RawMessage, decided map[string]Decision) (json.RawMessage, bool, error) {
	var items []obj
	if err := json.Unmarshal(raw, &items); err != nil {
		if len(raw) == 0 {
			return raw, false, nil
		}
		return nil, false, fmt.Errorf("output: %v", err)
	}
	changed := false
	for i, it := range items {
		if str(it, "type") != "function_call" {
			continue
		}
		name, callID := str(it, "name"), str(it, "call_id")
		var d Decision
		if decided != nil {
			var ok bool
			if d, ok = decided[callID]; !ok {
				// Not seen as its own events: judge it now.
				d = p.evaluate(ctx, provider, info, callID, name, it["arguments"])
			}
		} else {
			d = p.evaluate(ctx, provider, info, callID, name, it["arguments"])
		}
		if d.Action == Block {
			items[i] = messageItem(callID, blockedText(name, d), "completed")
			changed = true
		}
	}
	if !changed {
		return raw, false, nil
	}
	return mustJSON(items), true, nil
}

// messageItem is the Responses output item that replaces a blocked call.
func messageItem(callID, text, status string) obj {
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}})
	}
	return obj{
		"type": mustJSON("message"), "id": mustJSON("msg_toolgate_" + callID), "status": mustJSON(status),
		"role": mustJSON("assistant"), "content": mustJSON(content),
	}
}
