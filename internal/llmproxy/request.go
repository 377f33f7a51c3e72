package llmproxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// Inspector scans what an agent sends its model: the results of earlier
// tool calls and the tool definitions, and records its own detections. It
// returns a non-empty refusal to stop the request, or, by call id, the
// text that replaces a tool result the model must not read (withhold).
type Inspector interface {
	InspectRequest(ctx context.Context, provider, session string, results []ToolResult, defs map[string]*mcp.Tool) (refusal string, withhold map[string]string)
}

// parseRequest reads the declared tools, the first user message and the
// tool results of a request. Like the decisions on responses, it reads by
// exact key, as the provider does: encoding/json's struct decoding would
// take "Content" for "content" and let a duplicate key hide a result.
func parseRequest(provider, api string, body []byte) (requestInfo, error) {
	var info requestInfo
	var req obj
	if err := json.Unmarshal(body, &req); err != nil {
		return info, err
	}
	info.defs = map[string]*mcp.Tool{}
	var tools []obj
	_ = json.Unmarshal(req["tools"], &tools)
	for _, t := range tools {
		name, desc, schema := str(t, "name"), str(t, "description"), t["input_schema"]
		var fn obj
		switch {
		case json.Unmarshal(t["function"], &fn) == nil && fn != nil: // Chat
			name, desc, schema = str(fn, "name"), str(fn, "description"), fn["parameters"]
		case provider == config.ProviderOpenAI: // Responses
			schema = t["parameters"]
		}
		if name == "" {
			continue
		}
		var sc any
		if len(schema) > 0 {
			_ = json.Unmarshal(schema, &sc)
		}
		info.defs[name] = &mcp.Tool{Name: name, Description: desc, InputSchema: sc}
	}
	var msgs []obj
	if api == apiResponses {
		if in := req["input"]; len(in) > 0 && in[0] == '"' {
			info.firstUser = in
		} else {
			_ = json.Unmarshal(in, &msgs)
		}
	} else {
		_ = json.Unmarshal(req["messages"], &msgs)
	}
	for _, m := range msgs {
		role := str(m, "role")
		if role == "user" && info.firstUser == nil {
			info.firstUser = m["content"]
		}
		switch {
		case role == "tool": // Chat
			info.results = append(info.results, ToolResult{CallID: str(m, "tool_call_id"), Text: contentText(m["content"])})
		case str(m, "type") == "function_call_output": // Responses
			info.results = append(info.results, ToolResult{CallID: str(m, "call_id"), Text: contentText(m["output"])})
		case role == "user": // Anthropic tool_result blocks
			var blocks []obj
			_ = json.Unmarshal(m["content"], &blocks)
			for _, b := range blocks {
				if str(b, "type") == "tool_result" {
					info.results = append(info.results, ToolResult{CallID: str(b, "tool_use_id"), Text: contentText(b["content"])})
				}
			}
		}
	}
	return info, nil
}

// contentText is the text of a content value: a string, or the text parts
// of an array of blocks.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var blocks []obj
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var out []byte
	for _, b := range blocks {
		if t := str(b, "text"); t != "" {
			if len(out) > 0 {
				out = append(out, '\n')
			}
			out = append(out, t...)
		}
	}
	return string(out)
}

// withholdResults replaces the content of the tool results named in
// withhold (by call id) with its text, in any of the three request shapes.
// Everything else in the body is kept (key order aside).
func withholdResults(api string, body []byte, withhold map[string]string) ([]byte, error) {
	var req obj
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	key := "messages"
	if api == apiResponses {
		key = "input"
	}
	var msgs []obj
	if err := json.Unmarshal(req[key], &msgs); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		switch {
		case str(m, "role") == "tool": // Chat
			if t, ok := withhold[str(m, "tool_call_id")]; ok {
				m["content"] = mustJSON(t)
			}
		case str(m, "type") == "function_call_output": // Responses
			if t, ok := withhold[str(m, "call_id")]; ok {
				m["output"] = mustJSON(t)
			}
		case str(m, "role") == "user": // Anthropic tool_result blocks
			var blocks []obj
			if json.Unmarshal(m["content"], &blocks) != nil {
				continue
			}
			changed := false
			for _, b := range blocks {
				if str(b, "type") != "tool_result" {
					continue
				}
				if t, ok := withhold[str(b, "tool_use_id")]; ok {
					b["content"] = mustJSON(t)
					changed = true
				}
			}
			if changed {
				m["content"] = mustJSON(blocks)
			}
		}
	}
	req[key] = mustJSON(msgs)
	return json.Marshal(req)
}
