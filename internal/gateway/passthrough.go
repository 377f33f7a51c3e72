package gateway

//lint:file-ignore SA1019 passthrough relays MCP's logging, sampling and roots features while clients and upstreams still use them; SEP-2577 deprecates them with a long window.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Passthrough mode: toolgate is a transparent MCP proxy. tools/list answers
// with every catalogued upstream tool the search filters let through,
// tools/call runs the same call path as call_tool (call filters, audit,
// response filters), and everything else MCP carries is relayed to the
// upstream that owns it, in both directions. Hybrid mode serves the
// meta-tools plus the configured pinned tools this way. docs/passthrough.md
// describes the behaviour; this file is its implementation. Nothing here
// masks secrets: seal (redact.go) masks every message the client-facing
// server sends, whatever relay produced it.

// uriPrefix marks a resource URI (or URI template) that more than one
// upstream serves: toolgate://SERVER/ORIGINAL. Server names never contain
// '/', so the first '/' after the prefix ends the server name.
const uriPrefix = "toolgate://"

// Placeholders added and removed at once to make the SDK send a
// list_changed notification to every session; the list handlers hide them.
const (
	placeholderTool     = "toolgate__list_changed"
	placeholderPrompt   = "toolgate__list_changed"
	placeholderResource = "toolgate://list-changed"
)

// listTimeout bounds the fan-out of a list request to one upstream.
const listTimeout = 30 * time.Second

// relayedError is an upstream's JSON-RPC error that passthrough relays to
// the client unchanged.
type relayedError struct{ rpc *jsonrpc.Error }

func (e relayedError) Error() string { return e.rpc.Error() }
func (e relayedError) Unwrap() error { return e.rpc }

// passthrough holds the state of the passthrough and hybrid modes.
type passthrough struct {
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

	seq atomic.Uint64

	mu       sync.Mutex
	inflight map[string]map[*mcp.ServerSession]int // upstream → client sessions with requests in flight
	progress map[string]progressRoute              // our progress token → client's
	owners   map[string]string                     // exposed resource URI → upstream, from the last list
	prefixes map[string]string                     // literal prefix of a resource template → upstream
	subs     map[string]map[*mcp.ServerSession]bool
}

type progressRoute struct {
	ss    *mcp.ServerSession
	token any
}

func newPassthrough(g *Gateway, cfg *config.Config) *passthrough {
	p := &passthrough{
		g: g, hybrid: cfg.Mode == config.ModeHybrid,
		pinned: map[string]bool{}, extTools: map[string]bool{}, extResources: map[string]bool{},
		inflight: map[string]map[*mcp.ServerSession]int{}, progress: map[string]progressRoute{},
		owners: map[string]string{}, prefixes: map[string]string{}, subs: map[string]map[*mcp.ServerSession]bool{},
	}
	if !cfg.Namespaced() {
		p.bare = cfg.OnlyServer()
	}
	for _, n := range cfg.PinnedTools {
		p.pinned[n] = true
	}
	return p
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
		},
		CompletionHandler:  p.complete,
		SubscribeHandler:   p.subscribe,
		UnsubscribeHandler: p.unsubscribe,
	})
	for _, e := range g.pipe.Extensions() {
		for _, t := range e.Tools() {
			if t.Tool == nil || t.Handler == nil {
				return nil, fmt.Errorf("extension %s: a contributed tool has no definition or handler", e.ID())
			}
			p.extTools[t.Tool.Name] = true
			s.AddTool(t.Tool, t.Handler)
		}
		for _, r := range e.Resources() {
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
func (p *passthrough) middleware(sc scope, full bool) mcp.Middleware {
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
				return p.listResources(ctx, r, next, method)
			case *mcp.ListResourceTemplatesRequest:
				return p.listTemplates(ctx, r, next, method)
			case *mcp.ReadResourceRequest:
				if p.extResources[r.Params.URI] {
					return next(ctx, method, req)
				}
				return p.readResource(ctx, r)
			case *mcp.ListPromptsRequest:
				return p.listPrompts(ctx, r)
			case *mcp.GetPromptRequest:
				return p.getPrompt(ctx, r)
			case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
				res, err := next(ctx, method, req) // the session's own level filters what it is sent
				if err == nil {
					p.setLevel(ctx, r)
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	}
}

func (p *passthrough) pinnedName(name string) bool { return p.pinned[name] }

// expose maps an upstream name (tool or prompt) to the name clients see.
func (p *passthrough) expose(server, name string) string {
	if p.bare != "" {
		return name
	}
	return catalog.Qualify(server, name)
}

// resolve maps a client-side name back to its upstream and upstream name.
func (p *passthrough) resolve(name string) (server, upstreamName string, ok bool) {
	if p.bare != "" {
		return p.bare, name, name != ""
	}
	return catalog.Split(name)
}

// session returns the client session behind a request and its gate key.
func (p *passthrough) session(sc scope, req mcp.Request) (*mcp.ServerSession, string) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil || sc != scopeConnection {
		return ss, ""
	}
	return ss, p.g.sessionKey(ss)
}

// listed returns the tools a client is shown: every catalogued tool that
// the search filters let through (in hybrid mode, only the pinned ones),
// keyed by the name the client sees.
func (p *passthrough) listed(ctx context.Context, key string) (map[string]*catalog.Tool, []extension.SearchResult, error) {
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
	results, err := p.g.pipe.Search(ctx, &extension.SearchRequest{TopK: len(results), Session: key, Principal: extension.PrincipalFrom(ctx).ID()}, results)
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
// calls name (qualified: its catalogue name): the same filters run on that
// one tool.
func (p *passthrough) shows(ctx context.Context, key, name, qualified string) (bool, error) {
	t, ok := p.g.cat.Lookup(qualified)
	if !ok || p.exposeTool(t) != name || (p.hybrid && !p.pinned[qualified]) || (p.bare != "" && t.Server != p.bare) {
		return false, nil
	}
	results, err := p.g.pipe.Search(ctx, &extension.SearchRequest{TopK: 1, Session: key, Principal: extension.PrincipalFrom(ctx).ID()}, []extension.SearchResult{searchResult(t, 1)})
	return err == nil && len(results) == 1 && results[0].Name == qualified, err
}

func (p *passthrough) exposeTool(t *catalog.Tool) string {
	if p.hybrid {
		return t.Qualified
	}
	return p.expose(t.Server, t.Name)
}

func (p *passthrough) listTools(ctx context.Context, sc scope, req *mcp.ListToolsRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
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
		if t.Name != placeholderTool {
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
func (p *passthrough) callTool(ctx context.Context, sc scope, req *mcp.CallToolRequest) (mcp.Result, error) {
	ss, key := p.session(sc, req)
	name := req.Params.Name
	server, tool, ok := p.resolve(name)
	if p.hybrid {
		server, tool, ok = catalog.Split(name)
	}
	ctx = withPrincipal(ctx, req)
	creq := &extension.CallRequest{ToolName: catalog.Qualify(server, tool), ServerName: server, Tool: tool, Session: key, Principal: principalID(req)}
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	shown, err := p.shows(ctx, key, name, creq.ToolName)
	if err != nil {
		p.g.intercepted(ctx, creq, "block", "list_filter_error")
		return nil, filterRPCError(err)
	}
	if !shown {
		p.g.intercepted(ctx, creq, "block", "not_listed")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	args, err := objectArgs(req.Params.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	creq.Arguments = args
	res, err := p.g.callGated(ctx, creq, func(ctx context.Context, srv *upstream.Server, tool string) (*mcp.CallToolResult, error) {
		defer p.track(srv.Name(), ss)()
		params := &mcp.CallToolParams{Meta: p.relayMeta(req.Params.Meta, ss), Name: tool, Arguments: creq.Arguments}
		defer p.dropProgress(params.Meta)
		return p.sendCall(ctx, srv, params)
	})
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) && !isDenial(err) {
			return nil, rpc
		}
		return nil, filterRPCError(err)
	}
	return res, nil
}

func isDenial(err error) bool { _, ok := extension.AsDenial(err); return ok }

// filterRPCError is the JSON-RPC error of a filter's refusal: the denial's
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

// sendCall calls a tool on the shared upstream session with the client's
// _meta (progress token rewritten), so progress, logs and server-to-client
// requests can be routed back. A JSON-RPC error from the upstream is
// relayed as it is.
func (p *passthrough) sendCall(ctx context.Context, srv *upstream.Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	sess, done, err := srv.Use(ctx)
	if err != nil {
		return nil, err
	}
	limit := srv.CallTimeout()
	cctx, cancel := context.WithTimeout(ctx, limit)
	res, err := sess.CallTool(cctx, params)
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	done(err)
	switch {
	case err == nil:
		return res, nil
	case timedOut:
		return nil, fmt.Errorf("server %q did not answer within %s (its call_timeout); the call was cancelled upstream", srv.Name(), limit)
	case errors.Is(err, mcp.ErrConnectionClosed):
		// The connection had broken before the call was sent (Use marked
		// the server down): upstream.CallTool starts it again. Progress
		// and server-to-client requests of this one call are not relayed.
		return srv.CallTool(ctx, params.Name, params.Arguments.(map[string]any))
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return nil, relayedError{rpc}
	}
	return nil, err
}

// with runs f on server's session with ss's request tracked, so
// server-to-client traffic during it is routed back to ss.
func (p *passthrough) with(ctx context.Context, srv *upstream.Server, ss *mcp.ServerSession, f func(*mcp.ClientSession) error) error {
	sess, done, err := srv.Use(ctx)
	if err != nil {
		return err
	}
	untrack := p.track(srv.Name(), ss)
	err = f(sess)
	untrack()
	done(err)
	return err
}

// track records that ss has a request in flight on server until the
// returned func is called.
func (p *passthrough) track(server string, ss *mcp.ServerSession) func() {
	if ss == nil {
		return func() {}
	}
	p.mu.Lock()
	m := p.inflight[server]
	if m == nil {
		m = map[*mcp.ServerSession]int{}
		p.inflight[server] = m
	}
	m[ss]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if m[ss]--; m[ss] <= 0 {
			delete(m, ss)
		}
		p.mu.Unlock()
	}
}

// caller returns the one client session with requests in flight on server:
// the session a server-to-client request from it belongs to. With none or
// several, it refuses rather than guess (a sampling request shown to the
// wrong client would leak one client's conversation to another).
func (p *passthrough) caller(server, method string) (*mcp.ServerSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.inflight[server]
	switch len(m) {
	case 1:
		for ss := range m {
			return ss, nil
		}
	case 0:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("toolgate: %s from %q is not part of any client request in flight, so there is no client to send it to", method, server)}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("toolgate: %d client sessions have requests in flight on %q; %s cannot be attributed to one of them, so it is refused", len(m), server, method)}
}

// hopMeta are the _meta keys by which a stateless (2026-07-28) client
// describes its own connection to toolgate on each request. They are not
// the upstream's business, and an upstream session negotiated on an older
// revision refuses a request that carries them ("unsupported protocol
// version").
var hopMeta = map[string]bool{
	"io.modelcontextprotocol/protocolVersion":    true,
	"io.modelcontextprotocol/clientInfo":         true,
	"io.modelcontextprotocol/clientCapabilities": true,
	"io.modelcontextprotocol/logLevel":           true,
	"io.modelcontextprotocol/subscriptionId":     true,
}

// relayMeta copies a client's _meta for the upstream, without the
// per-hop keys, replacing its progress token with one of ours that maps
// back to the client's.
func (p *passthrough) relayMeta(meta mcp.Meta, ss *mcp.ServerSession) mcp.Meta {
	if len(meta) == 0 {
		return nil
	}
	out := make(mcp.Meta, len(meta))
	for k, v := range meta {
		if !hopMeta[k] {
			out[k] = v
		}
	}
	if tok, ok := meta["progressToken"]; ok && ss != nil {
		ours := "toolgate-" + strconv.FormatUint(p.seq.Add(1), 10)
		p.mu.Lock()
		p.progress[ours] = progressRoute{ss: ss, token: tok}
		p.mu.Unlock()
		out["progressToken"] = ours
	}
	return out
}

func (p *passthrough) dropProgress(meta mcp.Meta) {
	if tok, ok := meta["progressToken"].(string); ok {
		p.mu.Lock()
		delete(p.progress, tok)
		p.mu.Unlock()
	}
}

// upstreams returns the connected upstreams whose initialize result says
// they serve the feature has reports, starting any that is not running.
func (p *passthrough) upstreams(ctx context.Context, has func(*mcp.ServerCapabilities) bool) []*upstream.Server {
	var out []*upstream.Server
	for _, srv := range p.g.ups.Servers() {
		if p.bare != "" && srv.Name() != p.bare {
			continue
		}
		if p.admit(ctx, srv.Name()) != nil {
			continue
		}
		var caps *mcp.ServerCapabilities
		err := p.with(ctx, srv, nil, func(cs *mcp.ClientSession) error {
			if ir := cs.InitializeResult(); ir != nil {
				caps = ir.Capabilities
			}
			return nil
		})
		if err != nil {
			p.g.log.Warn("passthrough: upstream unavailable", "server", srv.Name(), "error", err)
			continue
		}
		if caps != nil && has(caps) {
			out = append(out, srv)
		}
	}
	return out
}

// admit asks every extension that admits whole servers; a refused server's
// resources, prompts and completions are hidden like a hidden tool.
func (p *passthrough) admit(ctx context.Context, server string) error {
	for _, e := range p.g.pipe.Extensions() {
		if a, ok := e.(extension.ServerAdmitter); ok {
			if err := a.AdmitServer(ctx, server); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasResources(c *mcp.ServerCapabilities) bool { return c.Resources != nil }
func hasPrompts(c *mcp.ServerCapabilities) bool   { return c.Prompts != nil }

func hasLogging(c *mcp.ServerCapabilities) bool { return c.Logging != nil }

// fanOut runs f for each server concurrently with the request's session
// tracked, and returns the results in server order; a failing upstream is
// left out with a warning.
func fanOut[T any](ctx context.Context, p *passthrough, ss *mcp.ServerSession, servers []*upstream.Server, f func(ctx context.Context, server string, cs *mcp.ClientSession) (T, error)) []T {
	out := make([]T, len(servers))
	ok := make([]bool, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, listTimeout)
			defer cancel()
			err := p.with(cctx, srv, ss, func(cs *mcp.ClientSession) (err error) {
				out[i], err = f(cctx, srv.Name(), cs)
				return err
			})
			if err != nil {
				p.g.log.Warn("passthrough: upstream list failed; its entries are left out", "server", srv.Name(), "error", err)
				return
			}
			ok[i] = true
		}()
	}
	wg.Wait()
	var res []T
	for i := range out {
		if ok[i] {
			res = append(res, out[i])
		}
	}
	return res
}

type serverResources struct {
	server    string
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
}

func (p *passthrough) listResources(ctx context.Context, req *mcp.ListResourcesRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	own, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	lists := fanOut(ctx, p, ss, p.upstreams(ctx, hasResources), func(ctx context.Context, server string, cs *mcp.ClientSession) (serverResources, error) {
		var out []*mcp.Resource
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return serverResources{}, err
			}
			out = append(out, r)
		}
		return serverResources{server: server, resources: out}, nil
	})
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	if o, _ := own.(*mcp.ListResourcesResult); o != nil {
		for _, r := range o.Resources {
			if r.URI != placeholderResource {
				res.Resources = append(res.Resources, r)
			}
		}
	}
	count := map[string]int{}
	for _, l := range lists {
		for _, r := range l.resources {
			count[r.URI]++
		}
	}
	owners := map[string]string{}
	for _, l := range lists {
		for _, r := range l.resources {
			c := *r
			if count[r.URI] > 1 || strings.HasPrefix(r.URI, uriPrefix) {
				c.URI = uriPrefix + l.server + "/" + r.URI
			} else {
				owners[r.URI] = l.server
			}
			res.Resources = append(res.Resources, &c)
		}
	}
	p.mu.Lock()
	for k, v := range owners {
		p.owners[k] = v
	}
	p.mu.Unlock()
	return res, nil
}

func (p *passthrough) listTemplates(ctx context.Context, req *mcp.ListResourceTemplatesRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	own, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	lists := fanOut(ctx, p, ss, p.upstreams(ctx, hasResources), func(ctx context.Context, server string, cs *mcp.ClientSession) (serverResources, error) {
		var out []*mcp.ResourceTemplate
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return serverResources{}, err
			}
			out = append(out, r)
		}
		return serverResources{server: server, templates: out}, nil
	})
	res := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	if o, _ := own.(*mcp.ListResourceTemplatesResult); o != nil {
		res.ResourceTemplates = append(res.ResourceTemplates, o.ResourceTemplates...)
	}
	count := map[string]int{}
	for _, l := range lists {
		for _, t := range l.templates {
			count[t.URITemplate]++
		}
	}
	prefixes := map[string]string{}
	for _, l := range lists {
		for _, t := range l.templates {
			c := *t
			if count[t.URITemplate] > 1 {
				c.URITemplate = uriPrefix + l.server + "/" + t.URITemplate
			} else if lit, _, _ := strings.Cut(t.URITemplate, "{"); lit != "" {
				prefixes[lit] = l.server
			}
			res.ResourceTemplates = append(res.ResourceTemplates, &c)
		}
	}
	p.mu.Lock()
	for k, v := range prefixes {
		p.prefixes[k] = v
	}
	p.mu.Unlock()
	return res, nil
}

// owner finds the upstream serving an exposed resource URI and the URI it
// knows it by: a toolgate:// prefix names it; else the last list did; else
// the longest literal prefix of a listed template; else, with one
// resource server, that one. Otherwise "" (the caller tries each).
func (p *passthrough) owner(uri string) (server, original string) {
	if rest, ok := strings.CutPrefix(uri, uriPrefix); ok {
		if s, orig, ok := strings.Cut(rest, "/"); ok {
			if _, known := p.g.ups.Get(s); known {
				return s, orig
			}
		}
	}
	if p.bare != "" {
		return p.bare, uri
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.owners[uri]; ok {
		return s, uri
	}
	best := ""
	for lit, s := range p.prefixes {
		if strings.HasPrefix(uri, lit) && len(lit) > len(best) {
			best, server = lit, s
		}
	}
	return server, uri
}

// onResource runs f against the upstream owning uri, or, when that is not
// known, against each resource server in name order until one answers.
func onResource[T any](ctx context.Context, p *passthrough, ss *mcp.ServerSession, uri string, f func(context.Context, *mcp.ClientSession, string) (T, error)) (T, error) {
	server, orig := p.owner(uri)
	var candidates []*upstream.Server
	if server != "" {
		if srv, ok := p.g.ups.Get(server); ok && p.admit(ctx, server) == nil {
			candidates = append(candidates, srv)
		}
	} else {
		candidates = p.upstreams(ctx, hasResources)
	}
	var zero T
	var first error
	for _, srv := range candidates {
		var res T
		err := p.with(ctx, srv, ss, func(cs *mcp.ClientSession) (err error) {
			res, err = f(ctx, cs, orig)
			return err
		})
		if err == nil {
			return res, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return zero, mcp.ResourceNotFoundError(uri)
	}
	return zero, relayErr(first)
}

// relayErr is an upstream's JSON-RPC error unchanged, or an internal error.
func relayErr(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

func (p *passthrough) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	uri := req.Params.URI
	res, err := onResource(ctx, p, ss, uri, func(ctx context.Context, cs *mcp.ClientSession, orig string) (*mcp.ReadResourceResult, error) {
		params := *req.Params
		params.URI = orig
		params.Meta = p.relayMeta(req.Params.Meta, ss)
		defer p.dropProgress(params.Meta)
		return cs.ReadResource(ctx, &params)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.Contents {
		if c != nil && c.URI != uri {
			if _, orig := p.owner(uri); c.URI == orig {
				c.URI = uri
			}
		}
	}
	return res, nil
}

func (p *passthrough) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	ss := req.Session
	_, err := onResource(ctx, p, ss, req.Params.URI, func(ctx context.Context, cs *mcp.ClientSession, orig string) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: orig})
	})
	if err == nil {
		p.mu.Lock()
		if p.subs[req.Params.URI] == nil {
			p.subs[req.Params.URI] = map[*mcp.ServerSession]bool{}
		}
		p.subs[req.Params.URI][ss] = true
		p.mu.Unlock()
	}
	return err
}

// unsubscribe forwards an unsubscribe once no client session is
// subscribed to the URI any more (the upstream subscription is shared).
func (p *passthrough) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	p.mu.Lock()
	delete(p.subs[req.Params.URI], req.Session)
	last := len(p.subs[req.Params.URI]) == 0
	p.mu.Unlock()
	if !last {
		return nil
	}
	_, err := onResource(ctx, p, req.Session, req.Params.URI, func(ctx context.Context, cs *mcp.ClientSession, orig string) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: orig})
	})
	return err
}

type serverPrompts struct {
	server  string
	prompts []*mcp.Prompt
}

func (p *passthrough) listPrompts(ctx context.Context, req *mcp.ListPromptsRequest) (mcp.Result, error) {
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
			c.Name = p.expose(l.server, pr.Name)
			res.Prompts = append(res.Prompts, &c)
		}
	}
	return res, nil
}

func (p *passthrough) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	server, name, ok := p.resolve(req.Params.Name)
	srv, up := p.g.ups.Get(server)
	if !ok || !up || p.admit(ctx, server) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", req.Params.Name)}
	}
	params := *req.Params
	params.Name = name
	params.Meta = p.relayMeta(req.Params.Meta, ss)
	defer p.dropProgress(params.Meta)
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

func (p *passthrough) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
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
		s, name, ok := p.resolve(ref.Name)
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
	srv, ok := p.g.ups.Get(server)
	if !ok || p.admit(ctx, server) != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown server %q", server)}
	}
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

// setLevel passes a client's logging level on to every upstream that logs.
// The upstream sessions are shared, so the most recent level wins there;
// each client session still only receives messages at or above its own
// level, which the SDK server enforces.
func (p *passthrough) setLevel(ctx context.Context, req *mcp.ServerRequest[*mcp.SetLoggingLevelParams]) {
	for _, srv := range p.upstreams(ctx, hasLogging) {
		err := p.with(ctx, srv, nil, func(cs *mcp.ClientSession) error {
			return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: req.Params.Level})
		})
		if err != nil {
			p.g.log.Warn("passthrough: logging/setLevel not passed on", "server", srv.Name(), "error", err)
		}
	}
}

// clientOptions are the handlers of an upstream's server-to-client traffic
// in passthrough and hybrid modes.
func (p *passthrough) clientOptions(server string) mcp.ClientOptions {
	return mcp.ClientOptions{
		Logger: sdkLogger(p.g.log),
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ss, err := p.caller(server, "sampling/createMessage")
			if err != nil {
				return nil, err
			}
			res, err := ss.CreateMessage(ctx, req.Params)
			return res, relayNil(err)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ss, err := p.caller(server, "elicitation/create")
			if err != nil {
				return nil, err
			}
			res, err := ss.Elicit(ctx, req.Params)
			return res, relayNil(err)
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			params := *req.Params
			if params.Logger == "" {
				params.Logger = server
			}
			for _, ss := range p.logTargets(server) {
				if err := ss.Log(ctx, &params); err != nil {
					p.g.log.Debug("passthrough: log message not delivered", "server", server, "error", err)
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
			if err := route.ss.NotifyProgress(ctx, &params); err != nil {
				p.g.log.Debug("passthrough: progress not delivered", "server", server, "error", err)
			}
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			uri := req.Params.URI
			p.mu.Lock()
			if _, ok := p.subs[uri]; !ok {
				if _, ok := p.subs[uriPrefix+server+"/"+uri]; ok {
					uri = uriPrefix + server + "/" + uri
				}
			}
			p.mu.Unlock()
			params := *req.Params
			params.URI = uri
			for _, s := range p.g.servers {
				if err := s.ResourceUpdated(ctx, &params); err != nil {
					p.g.log.Debug("passthrough: resource update not delivered", "error", err)
				}
			}
		},
		// Nothing to do for tools/list_changed: the manager hands it to
		// Gateway.relist, which coalesces a flood of them and tells the
		// clients after each re-list, so they see the new list.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			for _, s := range p.g.servers {
				s.AddPrompt(&mcp.Prompt{Name: placeholderPrompt}, placeholderPromptHandler)
				s.RemovePrompts(placeholderPrompt)
			}
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			for _, s := range p.g.servers {
				s.AddResource(&mcp.Resource{URI: placeholderResource, Name: "list-changed"}, placeholderResourceHandler)
				s.RemoveResources(placeholderResource)
			}
		},
	}
}

// relayNil relays a client's JSON-RPC error to the upstream unchanged.
func relayNil(err error) error {
	if err == nil {
		return nil
	}
	return relayErr(err)
}

// logTargets are the client sessions a log message from server goes to:
// those with a request in flight on it, else (a message outside any
// request) every session connected, each filtered by its own level.
func (p *passthrough) logTargets(server string) []*mcp.ServerSession {
	p.mu.Lock()
	var out []*mcp.ServerSession
	for ss := range p.inflight[server] {
		out = append(out, ss)
	}
	p.mu.Unlock()
	if len(out) > 0 {
		return out
	}
	for _, s := range p.g.servers {
		for ss := range s.Sessions() {
			out = append(out, ss)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// The placeholders are never listed; their handlers only exist because the
// SDK requires one.
func placeholderToolHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("not a tool")
}

func placeholderPromptHandler(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, errors.New("not a prompt")
}

func placeholderResourceHandler(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, mcp.ResourceNotFoundError(req.Params.URI)
}

// clientMiddleware relays the server-to-client requests the SDK client
// would otherwise answer or check itself: roots/list (the client's own
// static roots) and elicitation/create (whose requested schema the SDK
// client restricts more than the specification does, e.g. multi-select
// enums). Both go to the client session that caused them, unchanged.
func (p *passthrough) clientMiddleware(server string) []mcp.Middleware {
	return []mcp.Middleware{func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListRootsRequest:
				ss, err := p.caller(server, method)
				if err != nil {
					return nil, err
				}
				res, err := ss.ListRoots(ctx, r.Params)
				return res, relayNil(err)
			case *mcp.ElicitRequest:
				ss, err := p.caller(server, method)
				if err != nil {
					return nil, err
				}
				res, err := ss.Elicit(ctx, r.Params)
				return res, relayNil(err)
			}
			return next(ctx, method, req)
		}
	}}
}
