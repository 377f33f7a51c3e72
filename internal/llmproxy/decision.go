package llmproxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call is one tool call a model asked the agent to make, read from an API
// response.
type Call struct {
	// Provider is "anthropic" or "openai".
	Provider string
	// Session names the conversation (see Proxy).
	Session string
	// ID is the provider's id of the call (toolu_..., call_...).
	ID string
	// Name is the tool's name as the model wrote it.
	Name string
	// Arguments are the decoded arguments; nil when they were not a JSON
	// object.
	Arguments map[string]any
	// Def is the definition the model was given in the request's tools
	// array, or nil when the request declared no tool of that name.
	Def *mcp.Tool
}

// Decision actions.
const (
	Allow = "allow"
	Block = "block"
	// Skip: no registry knows the tool, so no filter judged it; it passes.
	Skip = "skip"
)

// Decision is the verdict on a Call.
type Decision struct {
	Action string
	// Rule names what decided, e.g. "access_control.deny_patterns".
	Rule string
	// Reason is safe to show the model and the user.
	Reason string
}

// Evaluator judges the tool calls in LLM responses; the gateway is one.
// It must be safe for concurrent use and record its own decisions.
type Evaluator interface {
	EvaluateLLMCall(ctx context.Context, c Call) Decision
}

// EvaluatorFunc adapts a function to Evaluator.
type EvaluatorFunc func(ctx context.Context, c Call) Decision

// EvaluateLLMCall calls f.
func (f EvaluatorFunc) EvaluateLLMCall(ctx context.Context, c Call) Decision { return f(ctx, c) }

// blockedText is the one line that replaces a blocked call in the response.
func blockedText(name string, d Decision) string {
	rule := d.Rule
	if rule == "" {
		rule = "policy"
	}
	reason := d.Reason
	if reason == "" {
		reason = "refused by policy"
	}
	return fmt.Sprintf("[toolgate] Tool '%s' blocked by %s: %s", name, rule, oneLine(reason))
}

func oneLine(s string) string {
	b := []rune(s)
	for i, r := range b {
		if r == '\n' || r == '\r' {
			b[i] = ' '
		}
	}
	if len(b) > 500 {
		b = append(b[:499], '…')
	}
	return string(b)
}

// argsObject decodes tool arguments that arrive as a JSON object (Anthropic)
// or as a string holding one (OpenAI). Anything else yields nil, which
// filters see as no arguments.
func argsObject(raw []byte) map[string]any {
	var m map[string]any
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		raw = []byte(s)
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
