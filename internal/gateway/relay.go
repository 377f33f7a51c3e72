package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/relay"
	"github.com/toolgate/toolgate/internal/upstream"
)

// encodeJSON encodes v as the SDK client does: map keys sorted, and '<',
// '>' and '&' left as they are (encoding/json's Marshal escapes them, and
// an upstream that echoes its arguments would show the difference).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// rawSend is the upstream leg of every tool call (callOpts.send when the
// caller sets none): on the server's raw leg, when it has one (stdio
// servers), the arguments the middleware passed on are sent as bytes and
// the answer comes back as bytes (extension.RawCallResult), decoded only
// if something asks; other servers take the SDK client (Server.Call). An
// upstream's JSON-RPC error comes back as the SDK client returns it
// (calling "tools/call": *jsonrpc.Error), so both legs read the same.
func (g *Gateway) rawSend(ctx context.Context, srv *upstream.Server, params *mcp.CallToolParams) (*extension.CallResult, error) {
	sdk := func() (*extension.CallResult, error) {
		res, err := srv.Call(ctx, params)
		if err != nil {
			return nil, err
		}
		return extension.NewCallResult(res), nil
	}
	if g.noRaw {
		return sdk()
	}
	a, err := rawArguments(params.Arguments)
	if err != nil {
		return nil, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	var m []byte
	if len(params.Meta) > 0 {
		if m, err = encodeJSON(params.Meta); err != nil {
			return nil, fmt.Errorf("calling %q: %w", "tools/call", err)
		}
	}
	ans, err := srv.RawCall(ctx, relay.AppendCallParams(nil, params.Name, a, m))
	if errors.Is(err, upstream.ErrNoRaw) {
		return sdk()
	}
	g.rawCalls.Add(1)
	switch {
	case err != nil:
		return nil, err
	case ans.Error != nil:
		var rpc jsonrpc.Error
		if err := json.Unmarshal(ans.Error, &rpc); err != nil {
			return nil, fmt.Errorf("calling %q: malformed error from the server: %w", "tools/call", err)
		}
		return nil, fmt.Errorf("calling %q: %w", "tools/call", &rpc)
	}
	return extension.RawCallResult(ans.Result), nil
}

// rawArguments is a call's arguments as the raw leg sends them: on one
// line (stdio frames a message per line, and a client's JSON over HTTP may
// span several) and as the SDK client would send the same value, which
// compacts it too.
func rawArguments(args any) ([]byte, error) {
	switch a := args.(type) {
	case nil:
		return []byte("{}"), nil // as the SDK client sends it
	case json.RawMessage:
		var b bytes.Buffer
		if err := json.Compact(&b, a); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return encodeJSON(args)
}

// The stdio frontend's tools/call go through the relay (package relay): the
// call is taken off the client's input before the SDK server reads it, and
// served by the same handlers the SDK would call (call_tool, passthrough's
// tools/call), through the same seal, without the SDK's decode, dispatch
// and encode around them. Sessions on the 2026-07-28 revision, whose
// requests carry per-request metadata the SDK checks, stay on the SDK's
// path, as does everything else.

// peelBefore is the first protocol revision the relay leaves to the SDK.
const peelBefore = "2026-07-28"

// ServeStdio serves one client over stdin/stdout until it disconnects or
// ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.serveIO(ctx, os.Stdin, os.Stdout)
}

// serveIO serves one client over newline-delimited JSON-RPC (stdio).
func (g *Gateway) serveIO(ctx context.Context, r io.Reader, w io.Writer) error {
	s := g.servers[scopeConnection]
	out := &relay.LockedWriter{W: w}
	var session atomic.Pointer[mcp.ServerSession]
	// The calls the relay serves end with the session, as the SDK's do.
	fctx, endCalls := context.WithCancel(ctx)
	defer endCalls()
	fe := &relay.Frontend{
		Ctx: fctx, Out: out,
		Peel: func(name string) bool {
			ss := session.Load()
			if g.noRaw || ss == nil {
				return false
			}
			ip := ss.InitializeParams()
			return ip != nil && ip.ProtocolVersion < peelBefore && g.peels(name)
		},
		Serve: func(ctx context.Context, c relay.Call) relay.Answer {
			return g.servePeeled(ctx, session.Load(), c)
		},
	}
	t := &mcp.IOTransport{
		Reader: io.NopCloser(&relay.Lines{R: r, Claim: fe.Claim, Max: mcp.DefaultMaxLineLength}),
		Writer: nopWriteCloser{out},
	}
	ss, err := s.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	session.Store(ss)
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		err = ctx.Err()
	case err = <-done:
	}
	endCalls()
	fe.Wait()
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// peels says whether a tools/call of name is one the relay serves: the
// calls the gateway relays to an upstream (call_tool in meta and hybrid
// mode, an upstream tool in passthrough mode or a pinned one in hybrid
// mode), not an extension's own tools.
func (g *Gateway) peels(name string) bool {
	p := g.pt
	switch {
	case p == nil:
		return name == "call_tool"
	case p.hybrid:
		return name == "call_tool" || p.pinnedName(name) && !p.extTools[name]
	}
	return !p.extTools[name]
}

// servePeeled answers a tools/call the relay took: the one call path
// (RunToolCall) as the SDK server's handler would run it (call_tool, or
// passthrough's tools/call), then the seal.
func (g *Gateway) servePeeled(ctx context.Context, ss *mcp.ServerSession, c relay.Call) relay.Answer {
	tc := ToolCall{Name: c.Name, Arguments: c.Arguments, Session: ss}
	if c.Meta != nil {
		if err := json.Unmarshal(c.Meta, &tc.Meta); err != nil {
			return relay.Answer{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid _meta: %v", err)}}
		}
	}
	var res mcp.Result
	var err error
	if g.pt != nil && (!g.pt.hybrid || c.Name != "call_tool") {
		out, r := g.RunToolCall(ctx, tc)
		if r == nil {
			if b, ok := g.forwardable(out); ok {
				return relay.Answer{Result: b}
			}
			var cr *mcp.CallToolResult
			if cr, r = decoded(out, c.Name, ""); r == nil {
				res = cr
			}
		}
		if r != nil {
			res, err = r.Answer()
		}
	} else {
		b, r := g.peeledCallTool(ctx, tc)
		if b != nil {
			return relay.Answer{Result: b}
		}
		if r.Content == nil {
			r.Content = []mcp.Content{} // as the SDK server does for a tool's result
		}
		res = r
	}
	if g.redact != nil {
		res, err = g.sealed("tools/call", res, err)
	}
	if err != nil {
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) {
			rpc = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		return relay.Answer{Error: rpc}
	}
	b, err := encodeJSON(res)
	if err != nil {
		return relay.Answer{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the result could not be encoded: %v", err)}}
	}
	return relay.Answer{Result: b}
}

// peeledCallTool is call_tool (handleCall) for the relay: tc holds
// call_tool's own arguments, which name the tool to call. It returns the
// answer's bytes when the upstream's can be forwarded as they came
// (forwardable), else the result to seal and encode.
func (g *Gateway) peeledCallTool(ctx context.Context, tc ToolCall) ([]byte, *mcp.CallToolResult) {
	var a callArgs
	if err := decodeArgs(tc.Arguments, &a); err != nil {
		return nil, errorResult("call_tool: %v. Expected {\"tool_name\": \"server__tool\", \"arguments\": {...}}.", err)
	}
	tc.Name, tc.Arguments, tc.Token, tc.CallTool = a.ToolName, a.Arguments, a.DiscoveryToken, true
	out, r := g.RunToolCall(ctx, tc)
	if r == nil {
		if b, ok := g.forwardable(out); ok {
			return b, nil
		}
		_, tool, _ := catalog.Split(a.ToolName)
		var res *mcp.CallToolResult
		if res, r = decoded(out, tool, "call_tool: "); r == nil {
			return nil, res
		}
	}
	return nil, r.ToolResult(a.ToolName)
}

// forwardable returns the answer to a result that can be sealed on its
// bytes, undecoded: bytes in the shape relay.PlainResult takes, which
// decoding and encoding (as the seal and the answer do) give back
// unchanged, with the seal's masking done on them (secrets.Canonical).
// When the masking cannot be done on the bytes, or gives bytes out of that
// shape (a secret in a key, or in the content's type), the result is
// decoded, sealed and encoded, as any other.
func (g *Gateway) forwardable(out *extension.CallResult) ([]byte, bool) {
	raw, ok := out.Raw()
	if !ok {
		return nil, false
	}
	if _, plain := relay.PlainResult(raw); !plain {
		return nil, false
	}
	if g.redact != nil {
		masked, changed, ok := g.redact.Canonical(raw)
		if !ok {
			return nil, false
		}
		if _, plain := relay.PlainResult(masked); changed && !plain {
			return nil, false
		}
		raw = masked
	}
	g.undecoded.Add(1)
	return raw, true
}
