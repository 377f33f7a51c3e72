package gateway

//lint:file-ignore SA1019 passthrough relays MCP's logging features while clients and upstreams still use them; SEP-2577 deprecates them with a long window.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/passthrough"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Passthrough mode: toolgate is a transparent MCP proxy. tools/list answers
// with every catalogued upstream tool the visibility filters let through,
// tools/call runs the same call path as call_tool (call.go), and everything
// else MCP carries is relayed to the upstream that owns it, in both
// directions, by package passthrough. Hybrid mode serves the meta-tools
// plus the configured pinned tools this way. docs/passthrough.md describes
// the behaviour. Nothing here masks secrets: seal (redact.go) masks every
// message the client-facing server sends, whatever relay produced it.

// ptMode holds the state of the passthrough and hybrid modes: the tools,
// and the relays of everything else.
type ptMode struct {
	*passthrough.Relay
	g      *Gateway
	hybrid bool
	// bare is the only upstream's name when names are not namespaced.
	bare string
	// pinned are the qualified names hybrid mode exposes directly.
	pinned map[string]bool
	// extTools and extResources are what extensions contribute; they are
	// served by the SDK server itself.
	extTools     map[string]bool
	extResources map[string]bool
	// logging holds the client sessions that set a logging level (until
	// they end): upstream log messages during a call go to them.
	logging sync.Map
}

func newPassthrough(g *Gateway, cfg *config.Config) *ptMode {
	p := &ptMode{
		g: g, hybrid: cfg.Mode == config.ModeHybrid,
		pinned: map[string]bool{}, extTools: map[string]bool{}, extResources: map[string]bool{},
	}
	if !cfg.Namespaced() {
		p.bare = cfg.OnlyServer()
	}
	for _, n := range cfg.PinnedTools {
		p.pinned[n] = true
	}
	p.Relay = passthrough.New(relayHost{g}, g.log, sdkLogger(g.log), p.bare)
	return p
}

// relayHost is the gateway as the relays see it.
type relayHost struct{ g *Gateway }

func (h relayHost) Upstream(name string) (*upstream.Server, bool) { return h.g.ups.Get(name) }
func (h relayHost) Upstreams() []*upstream.Server                 { return h.g.ups.Servers() }
func (h relayHost) Servers() []*mcp.Server {
	out := make([]*mcp.Server, 0, len(h.g.servers))
	for _, s := range h.g.servers {
		out = append(out, s)
	}
	return out
}

// Connection is the connection carrying the caller's credentials.
func (h relayHost) Connection(ctx context.Context, srv *upstream.Server) (*upstream.Server, error) {
	return h.g.forPrincipal(ctx, srv)
}

// Admit asks every extension that admits whole servers.
func (h relayHost) Admit(ctx context.Context, server string) error {
	for _, e := range h.g.pipe.Extensions() {
		if a, ok := e.(extension.ServerAdmitter); ok {
			if err := a.AdmitServer(ctx, server); err != nil {
				return err
			}
		}
	}
	return nil
}

// newPassthroughServer builds the MCP server of passthrough mode for a
// frontend scope: the SDK server answers initialize, ping and
// logging/setLevel, and serves extension-contributed tools and resources;
// a receiving middleware relays the rest.
func (g *Gateway) newPassthroughServer(sc scope) (*mcp.Server, error) {
	p := g.pt
	s := mcp.NewServer(&mcp.Implementation{Name: "toolgate", Title: "toolgate MCP gateway", Version: Version}, &mcp.ServerOptions{
		Logger: sdkLogger(g.log),
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
			Extensions:  extensionSettings(g.pipe.Extensions()),
		},
		CompletionHandler:  p.Complete,
		SubscribeHandler:   p.Subscribe,
		UnsubscribeHandler: p.Unsubscribe,
	})
	if err := extension.AddMethods(s, g.pipe.Extensions()); err != nil {
		return nil, err
	}
	for _, e := range g.pipe.Extensions() {
		for _, t := range extTools(e) {
			if t.Tool == nil || t.Handler == nil {
				return nil, fmt.Errorf("extension %s: a contributed tool has no definition or handler", e.ID())
			}
			p.extTools[t.Tool.Name] = true
			s.AddTool(t.Tool, t.Handler)
		}
		for _, r := range extResources(e) {
			if r.Resource == nil || r.Handler == nil {
				return nil, fmt.Errorf("extension %s: a contributed resource has no definition or handler", e.ID())
			}
			p.extResources[r.Resource.URI] = true
			s.AddResource(r.Resource, r.Handler)
		}
	}
	s.AddReceivingMiddleware(p.middleware(sc, true))
	return s, nil
}

// addPinned makes a meta-tools server (hybrid mode) also list and serve the
// pinned tools.
func (g *Gateway) addPinned(s *mcp.Server, sc scope) {
	s.AddReceivingMiddleware(g.pt.middleware(sc, false))
}

// middleware relays what passthrough handles; full says whether resources,
// prompts and logging are relayed too (passthrough) or only tools (hybrid).
func (p *ptMode) middleware(sc scope, full bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListToolsRequest:
				return p.listTools(ctx, sc, r, next, method)
			case *mcp.CallToolRequest:
				if p.extTools[r.Params.Name] || (p.hybrid && !p.pinnedName(r.Params.Name)) {
					return next(ctx, method, req)
				}
				return p.callTool(ctx, sc, r)
			}
			if !full {
				return next(ctx, method, req)
			}
			switch r := req.(type) {
			case *mcp.ListResourcesRequest:
				return p.ListResources(ctx, r, next, method)
			case *mcp.ListResourceTemplatesRequest:
				return p.ListTemplates(ctx, r, next, method)
			case *mcp.ReadResourceRequest:
				if p.extResources[r.Params.URI] {
					return next(ctx, method, req)
				}
				return p.ReadResource(ctx, r)
			case *mcp.ListPromptsRequest:
				return p.ListPrompts(ctx, r)
			case *mcp.GetPromptRequest:
				return p.GetPrompt(ctx, r)
			case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
				res, err := next(ctx, method, req) // the session's own level filters what it is sent
				if err == nil {
					p.SetLevel(ctx, r)
					p.setsLevel(r.Session)
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	}
}

func (p *ptMode) pinnedName(name string) bool { return p.pinned[name] }

// setsLevel records that ss set a logging level, until it ends.
func (p *ptMode) setsLevel(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	if _, loaded := p.logging.LoadOrStore(ss, true); !loaded {
		go func() {
			_ = ss.Wait()
			p.logging.Delete(ss)
		}()
	}
}

// relaysDuringCall says whether, during a tools/call of ss, an upstream's
// messages may be relayed to ss that the SDK server would send on the
// call's own stream and an answer to the call alone could not carry:
// requests for sampling or elicitation if its client can answer them, log
// messages if it set a level, and anything else (a request for its roots)
// unless it has a GET stream open (streaming), where the SDK sends what is
// not tied to a request in flight. Over HTTP such calls stay on its path.
func (p *ptMode) relaysDuringCall(ss *mcp.ServerSession, streaming bool) bool {
	if _, ok := p.logging.Load(ss); ok || !streaming {
		return true
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	return ip.Capabilities.Sampling != nil || ip.Capabilities.Elicitation != nil
}

// session returns the client session behind a request and its gate key.
func (p *ptMode) session(sc scope, req mcp.Request) (*mcp.ServerSession, string) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil || sc != scopeConnection {
		return ss, ""
	}
	return ss, p.g.sessionKey(ss)
}

// listed returns the tools a client is shown: every catalogued tool that
// the visibility filters let through (in hybrid mode, only the pinned ones),
// keyed by the name the client sees.
func (p *ptMode) listed(ctx context.Context, key string) (map[string]*catalog.Tool, []extension.SearchResult, error) {
	all := p.g.cat.All()
	results := make([]extension.SearchResult, 0, len(all))
	byQualified := make(map[string]*catalog.Tool, len(all))
	for _, t := range all {
		if p.hybrid && !p.pinned[t.Qualified] {
			continue
		}
		if p.bare != "" && t.Server != p.bare {
			continue
		}
		byQualified[t.Qualified] = t
		results = append(results, searchResult(t, 1))
	}
	results, err := p.g.pipe.Visible(ctx, &extension.VisibilityRequest{Session: key, Principal: extension.PrincipalFrom(ctx).ID()}, results)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]*catalog.Tool, len(results))
	for _, r := range results {
		if t := byQualified[r.Name]; t != nil {
			out[p.exposeTool(t)] = t
		}
	}
	return out, results, nil
}

// shows reports whether tools/list shows this session the tool the client
// calls name (qualified: its catalogue name): the visibility filters run
// on that one tool.
func (p *ptMode) shows(ctx context.Context, key, name, qualified string) (bool, error) {
	t, ok := p.g.cat.Lookup(qualified)
	if !ok || p.exposeTool(t) != name || (p.hybrid && !p.pinned[qualified]) || (p.bare != "" && t.Server != p.bare) {
		return false, nil
	}
	results, err := p.g.pipe.Visible(ctx, &extension.VisibilityRequest{Session: key, Principal: extension.PrincipalFrom(ctx).ID(), Limit: 1}, []extension.SearchResult{searchResult(t, 1)})
	return err == nil && len(results) == 1 && results[0].Name == qualified, err
}

func (p *ptMode) exposeTool(t *catalog.Tool) string {
	if p.hybrid {
		return t.Qualified
	}
	return p.Expose(t.Server, t.Name)
}

func (p *ptMode) listTools(ctx context.Context, sc scope, req *mcp.ListToolsRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	own, _ := res.(*mcp.ListToolsResult)
	if own == nil {
		own = &mcp.ListToolsResult{}
	}
	_, key := p.session(sc, req)
	ctx = withPrincipal(ctx, req)
	tools, results, err := p.listed(ctx, key)
	if err != nil {
		return nil, filterRPCError(err)
	}
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(own.Tools)+len(tools))}
	for _, t := range own.Tools {
		if t.Name != passthrough.PlaceholderTool {
			out.Tools = append(out.Tools, t)
		}
	}
	names := make([]string, 0, len(results))
	for _, r := range results {
		t, ok := p.g.cat.Lookup(r.Name)
		if !ok {
			continue
		}
		def := *t.Def()
		def.Name = p.exposeTool(t)
		out.Tools = append(out.Tools, &def)
		names = append(names, r.Name)
	}
	// Listing is how passthrough surfaces tools: what the client was shown
	// is recorded for the session, so call_tool (hybrid) accepts it too.
	if key != "" && len(names) > 0 {
		if err := p.g.gate.Record(ctx, key, names...); err != nil {
			p.g.log.Warn("gate: record listed tools", "error", err)
		}
	}
	return out, nil
}

// callTool runs a tools/call: the tool must be one tools/list shows this
// session (so hidden tools are unknown), then the shared call path runs.
// A refusal is a JSON-RPC error with the denial's code.
func (p *ptMode) callTool(ctx context.Context, sc scope, req *mcp.CallToolRequest) (mcp.Result, error) {
	ss, key := p.session(sc, req)
	ctx = withPrincipal(ctx, req)
	res, r := p.run(ctx, ss, key, req.Params.Name, req.Params.Arguments, req.Params.Meta, nil)
	if r == nil {
		var out *mcp.CallToolResult
		if out, r = decoded(res, req.Params.Name, ""); r == nil {
			return out, nil
		}
	}
	return r.Answer()
}

// run is tools/call in passthrough (or hybrid) mode for the tool the
// client calls name: the listing check, then the shared call path. The
// caller's principal is in ctx.
func (p *ptMode) run(ctx context.Context, ss *mcp.ServerSession, key, name string, args json.RawMessage, clientMeta mcp.Meta, send func(context.Context, *upstream.Server, *mcp.CallToolParams) (*extension.CallResult, error)) (*extension.CallResult, *Refusal) {
	server, tool, ok := p.Resolve(name)
	if p.hybrid {
		server, tool, ok = catalog.Split(name)
	}
	if !ok {
		return nil, &Refusal{rpc: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}}
	}
	creq := (&extension.CallRequest{ToolName: catalog.Qualify(server, tool), ServerName: server, Tool: tool, Session: key, Principal: extension.PrincipalFrom(ctx).ID()}).WithRawArguments(args)
	var meta mcp.Meta
	opts := &callOpts{
		relayRPC: true,
		send:     send,
		meta: func(ctx context.Context) mcp.Meta {
			meta = p.RelayMeta(ctx, clientMeta, ss)
			return meta
		},
		around: func(ctx context.Context, srv *upstream.Server) func() {
			untrack := p.Track(ctx, srv.Name(), ss)
			return func() { untrack(); p.DropProgress(meta) }
		},
	}
	return p.g.runCall(ctx, creq, opts, func() *Refusal {
		// Listing is the surfacing: a tool is callable exactly when
		// tools/list would show it to this session.
		shown, err := p.shows(ctx, key, name, creq.ToolName)
		if err != nil {
			return &Refusal{reason: "list_filter_error", phase: "request", rpc: filterRPCError(err)}
		}
		if !shown {
			return &Refusal{reason: "not_listed", phase: "request", rpc: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}}
		}
		if err := checkObject(args); err != nil {
			// Malformed input, not a decision: answered, not recorded.
			return &Refusal{rpc: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}}
		}
		return nil
	})
}

// filterRPCError is the JSON-RPC error of a filter's Refusal: the denial's
// own code (-32001 permission denied, -32003 resource exhausted, ...), or
// an internal error for a filter that failed without deciding.
func filterRPCError(err error) *jsonrpc.Error {
	if d, ok := extension.AsDenial(err); ok {
		e := *d.RPCError()
		if d.Rule != "" && d.RPC == nil {
			e.Message = fmt.Sprintf("refused by %s: %s", d.Rule, d.Reason)
		}
		return &e
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "refused: a filter failed"}
}
