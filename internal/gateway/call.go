package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/upstream"
)

// The one path of a tool call, shared by call_tool, passthrough's
// tools/call and toolgate call:
//
//	gate → call middleware (pipeline, phase order) → upstream stage
//	     → middleware's result handling (reverse order) → seal (redaction)
//
// The upstream stage records the allow decision (a call that cannot be
// recorded does not run), calls the upstream through upstream.Server.Call
// (which alone owns the timeout, the retry before sending and
// cancellation) and records tool_called. Refusals by the middleware are
// recorded by callGated, which wraps the whole pipeline, so each is
// recorded once whichever middleware refused.

// callOpts are what a caller of the path changes: the _meta sent upstream
// (passthrough relays the client's, progress token rewritten) and whether
// an upstream's JSON-RPC error is relayed as it is (passthrough) or
// reported as an isError result (meta-tools).
type callOpts struct {
	meta     func(ctx context.Context) mcp.Meta
	relayRPC bool
	// around wraps the upstream call (passthrough tracks the client
	// session it serves, to route server-to-client requests).
	around func(ctx context.Context, srv *upstream.Server) func()
	// send, when set, calls the upstream instead of rawSend (relay.go,
	// the raw leg to stdio servers and srv.Call to the others): a relay
	// that forwards bytes returns the upstream's result as it came
	// (extension.RawCallResult). It must honour the server's call timeout
	// and report an upstream's JSON-RPC error as a *jsonrpc.Error.
	send func(ctx context.Context, srv *upstream.Server, params *mcp.CallToolParams) (*extension.CallResult, error)
}

// say is an error result of the call path, worded for the request the
// client made: meta mode's call_tool messages start with "call_tool:", a
// passthrough client called tools/call itself.
func (o *callOpts) say(format string, args ...any) *mcp.CallToolResult {
	return errorResult(o.prefix()+format, args...)
}

// prefix starts the call path's messages to the client (see say).
func (o *callOpts) prefix() string {
	if o != nil && o.relayRPC {
		return ""
	}
	return "call_tool: "
}

type callStateKey struct{}

// callState carries one call's routing through the middleware to the
// upstream stage, and tells callGated how far the call got.
type callState struct {
	srv  *upstream.Server
	tool string
	opts *callOpts
	// reached is set once every middleware passed the call on.
	reached bool
}

// upstreamFailure is an upstream's failure to answer (or its JSON-RPC
// error), as opposed to a middleware's refusal.
type upstreamFailure struct{ err error }

func (u *upstreamFailure) Error() string { return u.err.Error() }
func (u *upstreamFailure) Unwrap() error { return u.err }

// noConnection is a call that has no upstream connection to run on: the
// caller's credentials for the server could not be chosen.
type noConnection struct{ err error }

func (n *noConnection) Error() string { return n.err.Error() }
func (n *noConnection) Unwrap() error { return n.err }

// errNotRecorded refuses a call whose allow decision could not be written
// to the audit log.
var errNotRecorded = errors.New("the audit log could not record the call")

// buildCallPath builds the pipeline's handler once; it is safe for
// concurrent use.
func (g *Gateway) buildCallPath() {
	g.callPath = g.pipe.Wrap(g.upstreamStage)
}

// upstreamStage is the end of the middleware chain: it records the allow
// decision and calls the upstream.
func (g *Gateway) upstreamStage(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
	st, _ := ctx.Value(callStateKey{}).(*callState)
	if st == nil {
		return nil, errors.New("tool call without a route")
	}
	st.reached = true
	// The allow decision is recorded before the call runs; a call that
	// cannot be recorded does not run.
	if err := g.intercepted(ctx, req, "allow", ""); err != nil {
		return nil, errNotRecorded
	}
	args, err := req.ArgumentsJSON()
	if err != nil {
		return nil, &upstreamFailure{err}
	}
	params := &mcp.CallToolParams{Name: st.tool, Arguments: args}
	if st.opts != nil && st.opts.meta != nil {
		params.Meta = st.opts.meta(ctx)
	}
	// The connection that carries the caller's credentials: the server's
	// own, or the principal's when the tokens file has entries per
	// principal or group for it.
	srv, err := g.forPrincipal(ctx, st.srv)
	if err != nil {
		return nil, &noConnection{err}
	}
	if st.opts != nil && st.opts.around != nil {
		defer st.opts.around(ctx, srv)()
	}
	start := time.Now()
	send := g.rawSend
	if st.opts != nil && st.opts.send != nil {
		send = st.opts.send
	}
	out, err := send(ctx, srv, params)
	isError := false
	if err == nil {
		isError, err = resultIsError(out)
	}
	k, v := g.argsField(req)
	fields := map[string]any{k: v, "duration_ms": float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		fields["error"] = err.Error()
		g.emit(ctx, extension.Event{Type: audit.ToolCalled, Session: req.Session, Server: req.ServerName, Tool: req.Tool, Action: "error", Fields: fields})
		return nil, &upstreamFailure{err}
	}
	fields["is_error"] = isError
	g.emit(ctx, extension.Event{Type: audit.ToolCalled, Session: req.Session, Server: req.ServerName, Tool: req.Tool, Action: "ok", Fields: fields})
	return out, nil
}

// Refusal is the one type of every way a tool call ends without a result
// to return: a check before the call (name, discovery gate, listing), a
// middleware's denial or failure, a refusal of the result, an upstream's
// failure, an audit log that cannot record. Each mode renders it: meta-tools
// as an isError result, passthrough as the JSON-RPC error a proxy answers
// with (or the same isError result for an upstream's failure).
type Refusal struct {
	// reason is recorded as the decision's reason; "" when nothing is to
	// be recorded (the upstream stage recorded the call, or the audit log
	// cannot record).
	reason string
	// phase is "request", or "response" for a refused result.
	phase string
	// denial is a middleware's refusal.
	denial *extension.Denial
	// result is the isError result that reports it, when not a denial.
	result *mcp.CallToolResult
	// rpc, when set, is the JSON-RPC error passthrough answers with.
	rpc *jsonrpc.Error
}

// refuse is a refusal by a check before the call, reported as text.
func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{reason: reason, phase: "request", result: errorResult(format, args...)}
}

// ToolResult renders r for the meta-tools: an isError result.
func (r *Refusal) ToolResult(tool string) *mcp.CallToolResult {
	if r.result != nil {
		return r.result
	}
	if r.denial != nil {
		return refusedResult(r.denial, "call_tool: %s was refused by %s: %s", tool, r.denial.Rule, r.denial.Reason)
	}
	return errorResult("call_tool: %s was refused.", tool)
}

// Answer renders r for passthrough: the JSON-RPC error of a denial or of a
// check, the upstream's own JSON-RPC error, or an isError result.
func (r *Refusal) Answer() (mcp.Result, error) {
	switch {
	case r.rpc != nil:
		return nil, r.rpc
	case r.denial != nil:
		return nil, filterRPCError(r.denial)
	}
	return r.result, nil
}

// runCall is the outermost stage of a tool call: it runs the mode's checks
// (check, before the call path), then the call path, and records the
// refusal, if any, exactly once.
func (g *Gateway) runCall(ctx context.Context, req *extension.CallRequest, opts *callOpts, check func() *Refusal) (*extension.CallResult, *Refusal) {
	// The middleware's steps go with the call's events to an observer (the
	// console shows them); without one, nothing is traced.
	if g.observer.Load() != nil {
		ctx = pipeline.WithTrace(ctx)
	}
	var res *extension.CallResult
	r := check()
	if r == nil {
		res, r = g.callGated(ctx, req, opts)
	}
	if r != nil && r.reason != "" {
		if r.phase == "response" {
			g.emit(ctx, extension.Event{Type: audit.ToolCallIntercepted, Session: req.Session, Server: req.ServerName, Tool: req.Tool, Action: "block", Reason: r.reason, Fields: map[string]any{"phase": "response"}})
		} else {
			g.intercepted(ctx, req, "block", r.reason)
		}
	}
	return res, r
}

// callGated runs a call that has passed the mode's checks: the call
// middleware, the allow and tool_called records, the upstream call and the
// middleware's result handling. It returns the result or the refusal;
// runCall records the refusal.
func (g *Gateway) callGated(ctx context.Context, req *extension.CallRequest, opts *callOpts) (*extension.CallResult, *Refusal) {
	server, tool := req.ServerName, req.Tool
	t, ok := g.cat.Lookup(req.ToolName)
	// Route by the catalogue entry, and only when the name splits back to
	// it: filters and the gate judged (server, tool) as split, so that must
	// be what runs.
	if ok && (t.Server != server || t.Name != tool) {
		ok = false
	}
	srv, up := g.ups.Get(server)
	if !ok || !up {
		if opts != nil && opts.relayRPC {
			// Passthrough has no search_tools: the tool list is where
			// the client finds what is there now.
			return nil, refuse("unknown_tool", "%q is not available any more (server %q is not connected or no longer offers it). List the tools again.", req.ToolName, server)
		}
		return nil, refuse("unknown_tool", "call_tool: %q is not available any more (server %q is not connected or no longer offers it). Call search_tools again.", req.ToolName, server)
	}
	req.Def = t.Def()
	st := &callState{srv: srv, tool: t.Name, opts: opts}
	out, err := g.callPath(context.WithValue(ctx, callStateKey{}, st), req)
	if err == nil {
		return out, nil
	}
	var uf *upstreamFailure
	var nc *noConnection
	switch {
	case errors.As(err, &nc):
		return nil, &Refusal{result: opts.say("%q was not run: %v.", req.ToolName, nc.err)}
	case errors.Is(err, errNotRecorded):
		// The error (logged by intercepted) names files: it stays in the
		// operator's log.
		return nil, &Refusal{result: opts.say("%q was not run because the audit log could not record it; tell the user to check the gateway's log.", req.ToolName)}
	case errors.As(err, &uf):
		// The upstream stage recorded the call and its error.
		if srv.Config().IsRemote() && authFailure(uf.err) {
			return nil, &Refusal{result: opts.say("%s", g.authMessage(ctx, server))}
		}
		r := &Refusal{result: upstreamError(opts.prefix(), srv, t.Name, uf.err)}
		var rpc *jsonrpc.Error
		if opts != nil && opts.relayRPC && errors.As(uf.err, &rpc) && !sdkRejected(rpc) {
			r.rpc = rpc
		}
		return nil, r
	}
	r := &Refusal{reason: "filter", phase: "request"}
	if st.reached {
		r.reason, r.phase = "response_filter", "response"
	}
	if d, ok := extension.AsDenial(err); ok {
		r.reason, r.denial = d.Rule, d
	}
	return nil, r
}

// ToolCall is a tool call as a relay that reads JSON-RPC itself hands it to
// the gateway (RunToolCall): the envelope parsed, the arguments as bytes.
type ToolCall struct {
	// Name is the tool's name: call_tool's tool_name in meta mode,
	// tools/call's name in passthrough and hybrid modes.
	Name string
	// Arguments is the JSON object as received; it is decoded only if a
	// filter or the audit asks, and forwarded as it is otherwise.
	Arguments json.RawMessage
	// Session is the client session (nil over stateless HTTP).
	Session *mcp.ServerSession
	// Stateless is set for the stateless HTTP frontend, whose discovery
	// gate checks Token instead of the session's record.
	Stateless bool
	// Token is call_tool's discovery_token.
	Token string
	// Meta is the client's _meta (passthrough relays it, progress token
	// rewritten).
	Meta mcp.Meta
	// Send, when set, calls the upstream instead of the gateway's own leg
	// (see callOpts.send).
	Send func(ctx context.Context, srv *upstream.Server, params *mcp.CallToolParams) (*extension.CallResult, error)
	// CallTool says Name is call_tool's tool_name, not a tools/call's name:
	// in hybrid mode the discovery gate then judges it even if pinned.
	CallTool bool
}

// RunToolCall runs c through the one call path of the gateway's mode: the
// discovery gate (meta, and hybrid for unpinned names) or the listing check
// (passthrough, and hybrid for pinned names), the call middleware, the
// upstream and the result handling. It returns the result (the upstream's
// bytes when nothing decoded them) or the refusal, recorded once; render
// it with ToolResult (call_tool) or Answer (tools/call). The caller's
// principal, if any, is in ctx (extension.WithPrincipal).
func (g *Gateway) RunToolCall(ctx context.Context, c ToolCall) (*extension.CallResult, *Refusal) {
	sc := scopeConnection
	if c.Stateless {
		sc = scopeStateless
	}
	key := ""
	if sc == scopeConnection && c.Session != nil {
		key = g.sessionKey(c.Session)
	}
	if g.pt != nil && !c.CallTool && (!g.pt.hybrid || g.pt.pinnedName(c.Name)) {
		return g.pt.run(ctx, c.Session, key, c.Name, c.Arguments, c.Meta, c.Send)
	}
	if err := checkObject(c.Arguments); err != nil {
		return nil, &Refusal{result: errorResult("call_tool: %v", err)}
	}
	req := (&extension.CallRequest{ToolName: c.Name, Session: key, Principal: extension.PrincipalFrom(ctx).ID()}).WithRawArguments(c.Arguments)
	return g.runMeta(ctx, sc, req, c.Token, &callOpts{send: c.Send})
}

// sdkRejected reports the JSON-RPC error the SDK's HTTP transport wraps
// around its own failures to send a request (an error status, a closed
// stream): it is the gateway's failure to reach the server, not an answer
// of the server's, so it is not relayed as one. The SDK keeps the value
// internal; its code and message identify it.
func sdkRejected(e *jsonrpc.Error) bool {
	return e.Code == -32005 && e.Message == "rejected by transport"
}

// decoded is the result a caller that answers with the SDK needs; a
// result that does not decode (a middleware's, or a relay's bytes) is the
// upstream's failure. prefix starts the message (see callOpts.prefix).
func decoded(out *extension.CallResult, tool, prefix string) (*mcp.CallToolResult, *Refusal) {
	res, err := out.Result()
	if err != nil {
		return nil, &Refusal{result: errorResult("%s%q answered with a result toolgate cannot read: %v", prefix, tool, err)}
	}
	return res, nil
}

// argsField is the audit field of a call's arguments: their hash, or the
// arguments themselves when the operator asked for them.
func (g *Gateway) argsField(req *extension.CallRequest) (string, any) {
	if h, ok := g.rawArgumentsHash(req); ok {
		return "arguments_hash", h
	}
	args := req.Args()
	if args == nil {
		args = map[string]any{}
	}
	return g.argsFieldOf(args)
}

// extTools are the tools e serves, if it is a ToolProvider.
func extTools(e extension.Extension) []extension.Tool {
	if tp, ok := e.(extension.ToolProvider); ok {
		return tp.Tools()
	}
	return nil
}

// extResources are the resources e serves, if it is a ResourceProvider.
func extResources(e extension.Extension) []extension.Resource {
	if rp, ok := e.(extension.ResourceProvider); ok {
		return rp.Resources()
	}
	return nil
}

// extensionCapabilities are the capabilities with every CapabilityProvider's
// settings at extensions[ID], or nil when no extension advertises any.
func extensionCapabilities(exts []extension.Extension) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{}
	extension.AddCapabilities(caps, exts)
	if len(caps.Extensions) == 0 {
		return nil
	}
	return caps
}

// extensionSettings is capabilities.extensions: nil when no extension
// advertises settings.
func extensionSettings(exts []extension.Extension) map[string]any {
	if caps := extensionCapabilities(exts); caps != nil {
		return caps.Extensions
	}
	return nil
}
