package gateway

import (
	"context"
	"errors"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/secrets"
)

// seal makes the client-facing server s mask every known secret in
// everything it sends: the result or error of every request it answers
// (receiving side, outermost so every other middleware and handler runs
// inside it) and every request or notification it sends (sampling,
// elicitation, roots, logs, progress, resource updates). Masking works on
// the JSON encoding of each message, so a field the relays did not think
// of, or a relay added later, cannot carry a secret past it. seal must be
// the last middleware added to s.
func (g *Gateway) seal(s *mcp.Server) {
	if g.redact == nil {
		return
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			return g.sealed(method, res, err)
		}
	})
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			masked, err := redactRequest(g.redact, req)
			if err != nil {
				g.log.Error("redaction failed; the message was not sent", "method", method, "error", err)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the message could not be checked for secrets, so it was withheld"}
			}
			return next(ctx, method, masked)
		}
	})
}

// sealed is a handler's answer as the seal lets it out: secrets masked in
// the result or the error. The relay's tools/call (relay.go) answers
// through it too.
func (g *Gateway) sealed(method string, res mcp.Result, err error) (mcp.Result, error) {
	if err != nil {
		return nil, g.redactError(err)
	}
	if res == nil {
		return nil, nil
	}
	out, _, rerr := g.redact.Encoded(res)
	if rerr != nil {
		g.log.Error("redaction failed; the result was withheld", "method", method, "error", rerr)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be checked for secrets, so it was withheld"}
	}
	// The encoding drops what a result holds for Go code only.
	if in, ok := res.(*mcp.CallToolResult); ok && in.GetError() != nil {
		if o, ok := out.(*mcp.CallToolResult); ok && o != in {
			o.SetError(in.GetError())
		}
	}
	return out.(mcp.Result), nil
}

// redactRequest returns req with its params masked: the same request when
// nothing was secret, else a copy (the original may be shared, e.g. one
// log message sent to many sessions) holding new params.
func redactRequest(r *secrets.Redactor, req mcp.Request) (mcp.Request, error) {
	params := req.GetParams()
	if params == nil {
		return req, nil
	}
	masked, changed, err := r.Encoded(params)
	if err != nil || !changed {
		return req, err
	}
	out, ok := withParams(req, masked.(mcp.Params))
	if !ok {
		return nil, errors.New("unknown request type")
	}
	return out, nil
}

// withParams copies a request with other params. The SDK's server sends
// *ServerRequest[Params] values today; any request struct with a settable
// Params field of a compatible type is copied the same way, so a request
// type the SDK adds later is masked too, not sent in clear.
func withParams(req mcp.Request, p mcp.Params) (mcp.Request, bool) {
	if r, ok := req.(*mcp.ServerRequest[mcp.Params]); ok {
		c := *r
		c.Params = p
		return &c, true
	}
	rv := reflect.ValueOf(req)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	c := reflect.New(rv.Elem().Type())
	c.Elem().Set(rv.Elem())
	f := c.Elem().FieldByName("Params")
	if !f.IsValid() || !f.CanSet() || !reflect.TypeOf(p).AssignableTo(f.Type()) {
		return nil, false
	}
	f.Set(reflect.ValueOf(p))
	out, ok := c.Interface().(mcp.Request)
	return out, ok
}

// redactError masks secrets in an error returned to the client. A JSON-RPC
// error keeps its code; any other error is sent by the SDK as its text.
func (g *Gateway) redactError(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		out := *rpc
		out.Message = secrets.StripURLs(g.redact.String(rpc.Message))
		if len(rpc.Data) > 0 {
			d, _, derr := g.redact.JSON(rpc.Data)
			if derr != nil {
				d = nil
			}
			out.Data = d
		}
		return &out
	}
	if msg := secrets.StripURLs(g.redact.String(err.Error())); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}

// ToolRefused is the event of a tool left out of the catalogue.
const ToolRefused = "tool_refused"

// refuseSecretNames drops the tools whose name holds a known secret: a
// server that puts a credential in a tool name is poisoned (it saw the
// secret and tries to get it past the redactor, or into the audit log and
// the pins, which record names). Masking the name instead would make the
// tool uncallable anyway. Each refusal is logged and recorded with the
// name masked.
func (g *Gateway) refuseSecretNames(ctx context.Context, server string, tools []*mcp.Tool) []*mcp.Tool {
	if g.redact.Empty() {
		return tools
	}
	out := tools[:0:0]
	for _, t := range tools {
		if t == nil || !g.redact.Contains(t.Name) {
			out = append(out, t)
			continue
		}
		masked := g.redact.String(t.Name)
		g.log.Warn("tool refused: its name contains a secret value; the server is treating credentials as data", "server", server, "tool", masked)
		g.emit(ctx, extension.Event{Type: ToolRefused, Server: server, Tool: masked, Action: "block", Reason: "secret_in_name"})
	}
	return out
}

// redactString masks known secrets in text that leaves outside an MCP
// message (seal covers those), such as /status.
func (g *Gateway) redactString(s string) string {
	if g.redact == nil || s == "" {
		return s
	}
	return g.redact.String(s)
}
