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

// wireRequest holds the parts of the three request shapes the proxy reads.
type wireRequest struct {
	Tools    []json.RawMessage `json:"tools"`
	Messages []json.RawMessage `json:"messages"`
	Input    json.RawMessage   `json:"input"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"` // Anthropic
	Parameters  json.RawMessage `json:"parameters"`   // OpenAI Responses
	Function    *struct {       // OpenAI Chat
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Type       string          `json:"type"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"` // Chat role tool
	CallID     string          `json:"call_id"`      // Responses function_call_output
	Output     json.RawMessage `json:"output"`       // Responses function_call_output
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func parseRequest(provider, api string, body []byte) (requestInfo, error) {
	var info requestInfo
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return info, err
	}
	info.defs = map[string]*mcp.Tool{}
	for _, raw := range req.Tools {
		var t wireTool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		name, desc, schema := t.Name, t.Description, t.InputSchema
		switch {
		case t.Function != nil:
			name, desc, schema = t.Function.Name, t.Function.Description, t.Function.Parameters
		case provider == config.ProviderOpenAI:
			schema = t.Parameters
		}
		if name == "" {
			continue
		}
		var s any
		if len(schema) > 0 {
			_ = json.Unmarshal(schema, &s)
		}
		info.defs[name] = &mcp.Tool{Name: name, Description: desc, InputSchema: s}
	}
	msgs := req.Messages
	if api == apiResponses {
		msgs = nil
		if len(req.Input) > 0 && req.Input[0] == '"' {
			info.firstUser = req.Input
		} else {
			_ = json.Unmarshal(req.Input, &msgs)
		}
	}
	for _, raw := range msgs {
		var m wireMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		if m.Role == "user" && info.firstUser == nil {
			info.firstUser = m.Content
		}
		switch {
		case m.Role == "tool": // Chat
			info.results = append(info.results, ToolResult{CallID: m.ToolCallID, Text: contentText(m.Content)})
		case m.Type == "function_call_output": // Responses
			info.results = append(info.results, ToolResult{CallID: m.CallID, Text: contentText(m.Output)})
		case m.Role == "user" && len(m.Content) > 0 && m.Content[0] == '[': // Anthropic tool_result blocks
			var blocks []wireBlock
			_ = json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				if b.Type == "tool_result" {
					info.results = append(info.results, ToolResult{CallID: b.ToolUseID, Text: contentText(b.Content)})
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
	var blocks []wireBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var out []byte
	for _, b := range blocks {
		if b.Text != "" {
			if len(out) > 0 {
				out = append(out, '\n')
			}
			out = append(out, b.Text...)
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
