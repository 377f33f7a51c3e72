package passthrough

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func (p *Relay) Complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ss := req.Session
	params := *req.Params
	if params.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: missing ref"}
	}
	ref := *params.Ref
	params.Ref = &ref
	var server string
	switch ref.Type {
	case "ref/prompt":
		s, name, ok := p.Resolve(ref.Name)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", ref.Name)}
		}
		server, ref.Name = s, name
	case "ref/resource":
		server, ref.URI = p.owner(ref.URI)
	}
	if server == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("completion/complete: cannot tell which server serves %s %q", ref.Type, ref.Name+ref.URI)}
	}
	srv, ok := p.host.Upstream(server)
	if !ok || p.admit(ctx, server) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown server %q", server)}
	}
	// The client's per-hop _meta (its protocol version, ...) is not the
	// upstream's business: an upstream session on an older revision
	// refuses a request that carries it.
	params.Meta = p.RelayMeta(ctx, req.Params.Meta, ss)
	defer p.DropProgress(params.Meta)
	var res *mcp.CompleteResult
	err := p.with(ctx, srv, ss, func(cs *mcp.ClientSession) (err error) {
		res, err = cs.Complete(ctx, &params)
		return err
	})
	if err != nil {
		return nil, relayErr(err)
	}
	return res, nil
}
