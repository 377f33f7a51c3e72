package passthrough

//lint:file-ignore SA1019 passthrough relays MCP's logging, sampling and roots features while clients and upstreams still use them; SEP-2577 deprecates them with a long window.

import (
	"context"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SetLevel passes a client's logging level on to every upstream that logs.
// The upstream sessions are shared, so the most recent level wins there;
// each client session still only receives messages at or above its own
// level, which the SDK server enforces.
func (p *Relay) SetLevel(ctx context.Context, req *mcp.ServerRequest[*mcp.SetLoggingLevelParams]) {
	for _, srv := range p.upstreams(ctx, hasLogging) {
		err := p.with(ctx, srv, nil, func(cs *mcp.ClientSession) error {
			return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: req.Params.Level})
		})
		if err != nil {
			p.log.Warn("passthrough: logging/setLevel not passed on", "server", srv.Name(), "error", err)
		}
	}
}

// logTargets are the client sessions a log message from server goes to:
// those with a request in flight on it, else (a message outside any
// request) every session connected, each filtered by its own level.
func (p *Relay) logTargets(server string) []*mcp.ServerSession {
	p.mu.Lock()
	var out []*mcp.ServerSession
	for ss := range p.inflight[server] {
		out = append(out, ss)
	}
	p.mu.Unlock()
	if len(out) > 0 {
		return out
	}
	for _, s := range p.host.Servers() {
		for ss := range s.Sessions() {
			out = append(out, ss)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}
