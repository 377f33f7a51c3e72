package extension

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/relay"
)

// CallHandler runs a tool call: the rest of the pipeline and, at its end,
// the upstream. It returns the result, or an error: a *Denial when the call
// was refused, any other error when it failed.
type CallHandler func(ctx context.Context, req *CallRequest) (*CallResult, error)

// Middleware wraps a CallHandler, as the go-sdk's mcp.Middleware wraps an
// mcp.MethodHandler. A CallMiddleware's WrapCall is one.
type Middleware func(next CallHandler) CallHandler

// Chain wraps h in mws; the first is the outermost.
func Chain(h CallHandler, mws ...Middleware) CallHandler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Before is the middleware of a check that runs before the call: a non-nil
// error refuses the call (it should be made by Deny), nil passes it on
// unchanged.
func Before(check func(ctx context.Context, req *CallRequest) error) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *CallRequest) (*CallResult, error) {
			if err := check(ctx, req); err != nil {
				return nil, err
			}
			return next(ctx, req)
		}
	}
}

// After is the middleware of an inspection of the upstream's result: it
// returns the result to pass on (nil keeps res), or an error that refuses
// it. It does not run when the call was refused or failed.
func After(inspect func(ctx context.Context, req *CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error)) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, req *CallRequest) (*CallResult, error) {
			out, err := next(ctx, req)
			if err != nil || out == nil {
				return out, err
			}
			res, err := out.Result()
			if err != nil {
				return nil, err
			}
			edited, err := inspect(ctx, req, res)
			if err != nil {
				return nil, err
			}
			if edited == nil || edited == res {
				return out, nil
			}
			return NewCallResult(edited), nil
		}
	}
}

// CallRequest is a tool call: call_tool in meta mode, tools/call in
// passthrough mode, or a tool call the LLM proxy sees. It is immutable
// once the gateway hands it on: a middleware that rewrites the call passes
// a new request (WithArguments) to next.
type CallRequest struct {
	// ToolName is the qualified name server__tool.
	ToolName   string
	ServerName string
	// Tool is the name on the upstream server.
	Tool      string
	Session   string
	Principal string
	// Def is the upstream's definition of the tool (annotations included);
	// filters must not modify it.
	Def *mcp.Tool

	args *arguments
}

// arguments holds a call's arguments as the bytes received and, once
// something asked, the decoded object. It is shared by the copies of a
// request, so arguments are decoded at most once per call.
type arguments struct {
	mu  sync.Mutex
	raw json.RawMessage
	// received says raw holds the arguments (it never changes).
	received bool
	m        map[string]any
	err      error
	decoded  bool
}

// WithArguments returns a copy of r whose arguments are args. args must not
// be modified afterwards.
func (r *CallRequest) WithArguments(args map[string]any) *CallRequest {
	c := *r
	if args == nil {
		args = map[string]any{}
	}
	c.args = &arguments{m: args, decoded: true}
	return &c
}

// WithRawArguments returns a copy of r whose arguments are the JSON object
// raw, decoded only if a filter asks for them. Empty or null raw means no
// arguments.
func (r *CallRequest) WithRawArguments(raw json.RawMessage) *CallRequest {
	c := *r
	c.args = &arguments{raw: raw, received: true}
	return &c
}

// RawArguments returns the arguments as received (WithRawArguments; empty
// or null means none), whether or not something decoded them; false when
// they were built in code (WithArguments).
func (r *CallRequest) RawArguments() (json.RawMessage, bool) {
	if r.args == nil || !r.args.received {
		return nil, false
	}
	return r.args.raw, true
}

// Arguments returns the call's arguments, decoded on first use (numbers as
// json.Number). The map is shared: treat it as read-only and rewrite with
// WithArguments. The error says why the arguments are not a JSON object.
func (r *CallRequest) Arguments() (map[string]any, error) {
	a := r.args
	if a == nil {
		return map[string]any{}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.decoded {
		a.m, a.err = DecodeArguments(a.raw)
		a.decoded = true
	}
	return a.m, a.err
}

// Args returns the decoded arguments, or nil when they are not a JSON
// object; for filters that only look and treat malformed input as empty.
func (r *CallRequest) Args() map[string]any {
	m, err := r.Arguments()
	if err != nil {
		return nil
	}
	return m
}

// ArgumentsJSON is what is forwarded upstream: the bytes received while
// nothing decoded them, else the encoding of the decoded (or rewritten)
// arguments, so that what filters judged is what runs.
func (r *CallRequest) ArgumentsJSON() (json.RawMessage, error) {
	a := r.args
	if a == nil {
		return json.RawMessage("{}"), nil
	}
	a.mu.Lock()
	decoded, m, err, raw := a.decoded, a.m, a.err, a.raw
	a.mu.Unlock()
	if !decoded {
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			return json.RawMessage("{}"), nil
		}
		return raw, nil
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// DecodeArguments decodes a tool call's arguments: a JSON object, numbers
// as json.Number; empty or null is no arguments.
func DecodeArguments(raw json.RawMessage) (map[string]any, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	if t[0] != '{' {
		return nil, fmt.Errorf("\"arguments\" must be a JSON object such as {\"path\": \"/tmp/a.txt\"}, got %s", describeJSON(t))
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("\"arguments\" is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("\"arguments\" is not valid JSON: data after the object")
	}
	return m, nil
}

func describeJSON(t []byte) string {
	switch t[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// CallResult is a tool call's result: the upstream's bytes, decoded only if
// something asks (Result), or a result built in code (NewCallResult).
type CallResult struct {
	mu  sync.Mutex
	raw json.RawMessage
	res *mcp.CallToolResult
	err error
}

// NewCallResult wraps res. res must not be modified afterwards.
func NewCallResult(res *mcp.CallToolResult) *CallResult { return &CallResult{res: res} }

// RawCallResult wraps the JSON of a CallToolResult as received.
func RawCallResult(raw json.RawMessage) *CallResult { return &CallResult{raw: raw} }

// Result returns the decoded result, decoding it on first use. Treat it as
// read-only: to edit a result, return NewCallResult of an edited copy.
func (r *CallResult) Result() (*mcp.CallToolResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.res == nil && r.err == nil {
		res := new(mcp.CallToolResult)
		if err := json.Unmarshal(r.raw, res); err != nil {
			r.err = fmt.Errorf("the tool's result is not valid: %v", err)
		} else {
			r.res = res
		}
	}
	return r.res, r.err
}

// Raw returns the bytes received, for a result that is the upstream's
// answer as it came (RawCallResult), not one built in code.
func (r *CallResult) Raw() (json.RawMessage, bool) {
	return r.raw, r.raw != nil
}

// Texts returns the text of each content item of a result still in the
// upstream's bytes, read from them without decoding the result, when the
// result holds text items only (in the shape and escaping the SDK writes);
// false otherwise, and the caller reads Result. An output scanner that
// reads only text uses it to leave the result undecoded.
func (r *CallResult) Texts() ([]string, bool) {
	if r.raw == nil {
		return nil, false
	}
	return relay.PlainTexts(r.raw)
}

// JSON returns the result's JSON: the bytes received, or the encoding of a
// result built in code.
func (r *CallResult) JSON() (json.RawMessage, error) {
	r.mu.Lock()
	raw, res := r.raw, r.res
	r.mu.Unlock()
	if raw != nil {
		return raw, nil
	}
	if res == nil {
		return nil, errors.New("empty call result")
	}
	return json.Marshal(res)
}
