package passthrough

//lint:file-ignore SA1019 passthrough relays MCP's logging, sampling and roots features while clients and upstreams still use them; SEP-2577 deprecates them with a long window.

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ClientOptions are the handlers of an upstream's server-to-client traffic
// in passthrough and hybrid modes.
func (p *Relay) ClientOptions(server string) mcp.ClientOptions {
	return mcp.ClientOptions{
		Logger: p.sdkLog,
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ss, err := p.caller(server, "sampling/createMessage")
			if err != nil {
				return nil, err
			}
			res, err := ss.CreateMessage(p.toClient(ctx, server, ss), req.Params)
			return res, relayNil(err)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ss, err := p.caller(server, "elicitation/create")
			if err != nil {
				return nil, err
			}
			res, err := ss.Elicit(p.toClient(ctx, server, ss), req.Params)
			return res, relayNil(err)
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			defer p.loggedOne(server)
			params := *req.Params
			if params.Logger == "" {
				params.Logger = server
			}
			for _, ss := range p.logTargets(server) {
				if err := ss.Log(p.toClient(ctx, server, ss), &params); err != nil {
					p.log.Debug("passthrough: log message not delivered", "server", server, "error", err)
				}
			}
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, _ := req.Params.ProgressToken.(string)
			p.mu.Lock()
			route, ok := p.progress[tok]
			p.mu.Unlock()
			if !ok {
				return
			}
			params := *req.Params
			params.ProgressToken = route.token
			if err := route.ss.NotifyProgress(frontCtx{ctx, route.ctx}, &params); err != nil {
				p.log.Debug("passthrough: progress not delivered", "server", server, "error", err)
			}
			p.mu.Lock()
			route.relayed++
			p.mu.Unlock()
			select {
			case route.changed <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			uri := req.Params.URI
			p.mu.Lock()
			if _, ok := p.subs[uri]; !ok {
				if _, ok := p.subs[URIPrefix+server+"/"+uri]; ok {
					uri = URIPrefix + server + "/" + uri
				}
			}
			p.mu.Unlock()
			params := *req.Params
			params.URI = uri
			for _, s := range p.host.Servers() {
				if err := s.ResourceUpdated(ctx, &params); err != nil {
					p.log.Debug("passthrough: resource update not delivered", "error", err)
				}
			}
		},
		// Nothing to do for tools/list_changed: the manager hands it to
		// Gateway.relist, which coalesces a flood of them and tells the
		// clients after each re-list, so they see the new list.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			for _, s := range p.host.Servers() {
				s.AddPrompt(&mcp.Prompt{Name: PlaceholderPrompt}, PlaceholderPromptHandler)
				s.RemovePrompts(PlaceholderPrompt)
			}
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			for _, s := range p.host.Servers() {
				s.AddResource(&mcp.Resource{URI: PlaceholderResource, Name: "list-changed"}, PlaceholderResourceHandler)
				s.RemoveResources(PlaceholderResource)
			}
		},
	}
}

// ClientMiddleware relays the server-to-client requests the SDK client
// would otherwise answer or check itself: roots/list (the client's own
// static roots) and elicitation/create (whose requested schema the SDK
// client restricts more than the specification does, e.g. multi-select
// enums). Both go to the client session that caused them, unchanged.
func (p *Relay) ClientMiddleware(server string) []mcp.Middleware {
	return []mcp.Middleware{func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListRootsRequest:
				ss, err := p.caller(server, method)
				if err != nil {
					return nil, err
				}
				res, err := ss.ListRoots(p.toClient(ctx, server, ss), r.Params)
				return res, relayNil(err)
			case *mcp.ElicitRequest:
				ss, err := p.caller(server, method)
				if err != nil {
					return nil, err
				}
				res, err := ss.Elicit(p.toClient(ctx, server, ss), r.Params)
				return res, relayNil(err)
			}
			return next(ctx, method, req)
		}
	}}
}
