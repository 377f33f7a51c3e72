package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// rawCall is the upstream leg of a tool call (call_tool and passthrough's
// tools/call) on the server's raw leg, when it has one (stdio servers):
// the arguments the filters judged are encoded once and sent as bytes,
// and the answer is decoded once. ok is false when the server has no raw
// leg; nothing was sent, and the caller uses the SDK client. An
// upstream's JSON-RPC error comes back as the SDK client returns it
// (calling "tools/call": *jsonrpc.Error), so both legs read the same.
func (g *Gateway) rawCall(ctx context.Context, srv *upstream.Server, tool string, args any, meta mcp.Meta) (res *mcp.CallToolResult, err error, ok bool) {
	if g.noRaw {
		return nil, nil, false
	}
	if args == nil {
		args = map[string]any{} // as the SDK client sends it
	}
	a, err := encodeJSON(args)
	if err != nil {
		return nil, fmt.Errorf("calling %q: %w", "tools/call", err), true
	}
	var m []byte
	if len(meta) > 0 {
		if m, err = encodeJSON(meta); err != nil {
			return nil, fmt.Errorf("calling %q: %w", "tools/call", err), true
		}
	}
	ans, err := srv.RawCall(ctx, relay.AppendCallParams(nil, tool, a, m))
	switch {
	case errors.Is(err, upstream.ErrNoRaw):
		return nil, nil, false
	case err != nil:
		return nil, err, true
	case ans.Error != nil:
		var rpc jsonrpc.Error
		if err := json.Unmarshal(ans.Error, &rpc); err != nil {
			return nil, fmt.Errorf("calling %q: malformed error from the server: %w", "tools/call", err), true
		}
		return nil, fmt.Errorf("calling %q: %w", "tools/call", &rpc), true
	}
	res = new(mcp.CallToolResult)
	if err := json.Unmarshal(ans.Result, res); err != nil {
		return nil, fmt.Errorf("calling %q: %w", "tools/call", err), true
	}
	return res, nil, true
}
