package passthrough

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type serverPrompts struct {
	server  string
	prompts []*mcp.Prompt
}

func (p *Relay) ListPrompts(ctx context.Context, req *mcp.ListPromptsRequest) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	lists := fanOut(ctx, p, ss, p.upstreams(ctx, hasPrompts), func(ctx context.Context, server string, cs *mcp.ClientSession) (serverPrompts, error) {
		var out []*mcp.Prompt
		for pr, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return serverPrompts{}, err
			}
			out = append(out, pr)
		}
		return serverPrompts{server: server, prompts: out}, nil
	})
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for _, l := range lists {
		for _, pr := range l.prompts {
			c := *pr
			c.Name = p.Expose(l.server, pr.Name)
			res.Prompts = append(res.Prompts, &c)
		}
	}
	return res, nil
}

func (p *Relay) GetPrompt(ctx context.Context, req *mcp.GetPromptRequest) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	server, name, ok := p.Resolve(req.Params.Name)
	srv, up := p.host.Upstream(server)
	if !ok || !up || p.admit(ctx, server) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", req.Params.Name)}
	}
	params := *req.Params
	params.Name = name
	params.Meta = p.RelayMeta(ctx, req.Params.Meta, ss)
	defer p.DropProgress(params.Meta)
	var res *mcp.GetPromptResult
	err := p.with(ctx, srv, ss, func(cs *mcp.ClientSession) (err error) {
		res, err = cs.GetPrompt(ctx, &params)
		return err
	})
	if err != nil {
		return nil, relayErr(err)
	}
	return res, nil
}
