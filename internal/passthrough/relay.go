// Package passthrough relays what an MCP client and the upstream servers
// exchange in toolgate's passthrough mode, apart from tools (which take the
// gateway's call path): resources, prompts, completions, logging and the
// upstreams' server-to-client requests (sampling, elicitation, roots,
// progress, notifications). Each concern is a file; the gateway is seen
// only through Host. docs/passthrough.md describes the behaviour.
//
// Nothing here masks secrets: the gateway seals every message its
// client-facing servers send, whatever relay produced it.
package passthrough

//lint:file-ignore SA1019 passthrough relays MCP's logging, sampling and roots features while clients and upstreams still use them; SEP-2577 deprecates them with a long window.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Host is what the relays need from the gateway.
type Host interface {
	// Upstream returns the connected upstream called name.
	Upstream(name string) (*upstream.Server, bool)
	// Upstreams lists the connected upstreams.
	Upstreams() []*upstream.Server
	// Admit refuses (an error) a server whose items must be hidden from
	// clients, as ServerAdmitter extensions decide.
	Admit(ctx context.Context, server string) error
	// Servers are the client-facing MCP servers, to notify their sessions.
	Servers() []*mcp.Server
	// Connection returns the connection to srv that carries the caller's
	// credentials (ctx holds the principal): srv itself, or the
	// principal's own connection when the tokens file has entries per
	// principal or group for it.
	Connection(ctx context.Context, srv *upstream.Server) (*upstream.Server, error)
}

// Relay holds the routing state of the relays: which client sessions have
// requests in flight on which upstream, progress tokens, resource owners
// and subscriptions. It is safe for concurrent use.
type Relay struct {
	host   Host
	log    *slog.Logger
	sdkLog *slog.Logger
	// bare is the only upstream's name when names are not namespaced.
	bare string

	seq atomic.Uint64

	mu       sync.Mutex
	inflight map[string]map[*mcp.ServerSession]*inflight // upstream → client sessions with requests in flight
	progress map[string]*progressRoute                   // our progress token → client's
	logs     map[string]*logCount                        // upstream → its log messages seen and relayed
	owners   map[string]string                           // exposed resource URI → upstream, from the last list
	prefixes map[string]string                           // literal prefix of a resource template → upstream
	subs     map[string]map[*mcp.ServerSession]bool
}

// New returns a Relay. bare, when set, is the only upstream, whose names
// are shown unqualified; sdkLog is the logger handed to the SDK clients.
func New(host Host, log, sdkLog *slog.Logger, bare string) *Relay {
	return &Relay{
		host: host, log: log, sdkLog: sdkLog, bare: bare,
		inflight: map[string]map[*mcp.ServerSession]*inflight{}, progress: map[string]*progressRoute{}, logs: map[string]*logCount{},
		owners: map[string]string{}, prefixes: map[string]string{}, subs: map[string]map[*mcp.ServerSession]bool{},
	}
}

// URIPrefix marks a resource URI (or URI template) that more than one
// upstream serves: toolgate://SERVER/ORIGINAL. Server names never contain
// '/', so the first '/' after the prefix ends the server name.
const URIPrefix = "toolgate://"

// Placeholders added and removed at once to make the SDK send a
// list_changed notification to every session; the list handlers hide them.
const (
	PlaceholderTool     = "toolgate__list_changed"
	PlaceholderPrompt   = "toolgate__list_changed"
	PlaceholderResource = "toolgate://list-changed"
)

// listTimeout bounds the fan-out of a list request to one upstream.
const listTimeout = 30 * time.Second

// progressRoute sends an upstream's progress for one relayed request to
// the client that asked for it.
type progressRoute struct {
	ss    *mcp.ServerSession
	token any
	// ctx is the client request's: on streamable HTTP, a notification
	// about a request goes on that request's own stream (the standalone
	// stream may not be open yet, and the message would be lost).
	ctx context.Context
	// seen counts the notifications the tap saw on the wire (before the
	// result), relayed those the SDK's handler has relayed since; the
	// result waits until relayed catches up (guarded by Relay.mu).
	seen, relayed int
	changed       chan struct{} // a relay happened
}

// inflight is one client session's requests in flight on an upstream.
type inflight struct {
	n   int
	ctx context.Context // the latest request's, for what the upstream sends back during it
}

// Expose maps an upstream name (tool or prompt) to the name clients see.
func (p *Relay) Expose(server, name string) string {
	if p.bare != "" {
		return name
	}
	return extension.Qualify(server, name)
}

// Resolve maps a client-side name back to its upstream and upstream name.
func (p *Relay) Resolve(name string) (server, upstreamName string, ok bool) {
	if p.bare != "" {
		return p.bare, name, name != ""
	}
	return extension.Split(name)
}

// with runs f on server's session with ss's request tracked, so
// server-to-client traffic during it is routed back to ss.
func (p *Relay) with(ctx context.Context, srv *upstream.Server, ss *mcp.ServerSession, f func(*mcp.ClientSession) error) error {
	conn, err := p.host.Connection(ctx, srv)
	if err != nil {
		return err
	}
	sess, done, err := conn.Use(ctx)
	if err != nil {
		return err
	}
	untrack := p.Track(ctx, srv.Name(), ss)
	err = f(sess)
	untrack()
	done(err)
	return err
}

// Track records that ss has a request (whose context is ctx) in flight on
// server until the returned func is called.
func (p *Relay) Track(ctx context.Context, server string, ss *mcp.ServerSession) func() {
	if ss == nil {
		return func() {}
	}
	p.mu.Lock()
	m := p.inflight[server]
	if m == nil {
		m = map[*mcp.ServerSession]*inflight{}
		p.inflight[server] = m
	}
	f := m[ss]
	if f == nil {
		f = &inflight{}
		m[ss] = f
	}
	f.n++
	f.ctx = ctx
	p.mu.Unlock()
	return func() {
		// Log messages the upstream sent before the result go to ss, on
		// its request's stream, before the result does.
		p.awaitLogs(server)
		p.mu.Lock()
		if f.n--; f.n <= 0 {
			delete(m, ss)
		}
		p.mu.Unlock()
	}
}

// frontCtx is the context of an upstream's message handler (its deadline
// and cancellation) carrying the values of the client request the message
// belongs to, so that what is relayed to the client goes on that request's
// stream.
type frontCtx struct {
	context.Context
	front context.Context
}

func (c frontCtx) Value(key any) any { return c.front.Value(key) }

// toClient is the context to relay a message from server to ss with: ctx
// with the values of ss's request in flight on server, if it has one.
func (p *Relay) toClient(ctx context.Context, server string, ss *mcp.ServerSession) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.inflight[server][ss]; f != nil && f.ctx != nil {
		return frontCtx{ctx, f.ctx}
	}
	return ctx
}

// caller returns the one client session with requests in flight on server:
// the session a server-to-client request from it belongs to. With none or
// several, it refuses rather than guess (a sampling request shown to the
// wrong client would leak one client's conversation to another).
func (p *Relay) caller(server, method string) (*mcp.ServerSession, error) {
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

// RelayMeta copies a client's _meta for the upstream, without the
// per-hop keys, replacing its progress token with one of ours that maps
// back to the client's request (whose context is ctx).
func (p *Relay) RelayMeta(ctx context.Context, meta mcp.Meta, ss *mcp.ServerSession) mcp.Meta {
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
		p.progress[ours] = &progressRoute{ss: ss, token: tok, ctx: ctx, changed: make(chan struct{}, 1)}
		p.mu.Unlock()
		out["progressToken"] = ours
	}
	return out
}

// progressDrain bounds how long a result waits for the progress
// notifications the upstream sent before it to be relayed. They are
// already read, so this only matters if the SDK never hands one over.
const progressDrain = 2 * time.Second

// DropProgress ends a request's progress route once every progress
// notification the upstream sent before its result has been relayed: the
// client gets them before the result, as the upstream sent them.
func (p *Relay) DropProgress(meta mcp.Meta) {
	tok, ok := meta["progressToken"].(string)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	route := p.progress[tok]
	if route == nil {
		return
	}
	var timeout <-chan time.Time
	for route.relayed < route.seen {
		if timeout == nil {
			t := time.NewTimer(progressDrain)
			defer t.Stop()
			timeout = t.C
		}
		p.mu.Unlock()
		select {
		case <-route.changed:
		case <-timeout:
			p.log.Warn("passthrough: progress notifications read before a result were not relayed in time", "missing", route.seen-route.relayed)
			p.mu.Lock()
			delete(p.progress, tok)
			return
		}
		p.mu.Lock()
	}
	delete(p.progress, tok)
}

// logCount counts one upstream's log messages: seen by the tap on the
// wire, relayed by the SDK's handler since (guarded by Relay.mu). The SDK
// hands a notification to a goroutine while its reader completes the call
// the next message answers, so without the count a result could overtake
// the log messages sent before it, and those would miss the request they
// are about (and, over streamable HTTP, its stream).
type logCount struct {
	seen, relayed int
	changed       chan struct{} // closed (and replaced) on each relay
}

// logDrain bounds how long a result waits for the log messages read
// before it to be relayed: only a message the SDK never hands over (it
// drops one it cannot decode) costs the wait.
const logDrain = time.Second

// awaitLogs waits until every log message the tap has seen from server so
// far has been relayed, or logDrain has passed.
func (p *Relay) awaitLogs(server string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lc := p.logs[server]
	if lc == nil || lc.relayed >= lc.seen {
		return
	}
	target := lc.seen
	t := time.NewTimer(logDrain)
	defer t.Stop()
	for lc.relayed < target {
		changed := lc.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-t.C:
			p.mu.Lock()
			p.log.Warn("passthrough: log messages read before a result were not relayed in time", "server", server, "missing", target-lc.relayed)
			// Take them as lost, so that later results do not wait for
			// them too.
			lc.relayed = max(lc.relayed, target)
			return
		}
		p.mu.Lock()
	}
}

// loggedOne records that the handler has relayed (or dropped) one log
// message of server.
func (p *Relay) loggedOne(server string) {
	p.mu.Lock()
	if lc := p.logs[server]; lc != nil && lc.relayed < lc.seen {
		lc.relayed++
		close(lc.changed)
		lc.changed = make(chan struct{})
	}
	p.mu.Unlock()
}

// progressMethod is how the tap recognises a progress notification
// without decoding every message.
var progressMethod = []byte(`"notifications/progress"`)

// logMethod is how the tap recognises a log message.
var logMethod = []byte(`"notifications/message"`)

// OnUpstreamMessage is the upstream tap (upstream.Options.OnMessage): it
// counts, in wire order, the progress notifications for routes of ours
// and the log messages, so that DropProgress and a request's end know what
// a result must wait for.
func (p *Relay) OnUpstreamMessage(server string, msg []byte) {
	if bytes.Contains(msg, logMethod) {
		p.countLog(server, msg) // (a progress message may quote the name too)
	}
	if !bytes.Contains(msg, progressMethod) {
		return
	}
	var n struct {
		Method string `json:"method"`
		Params struct {
			Token any `json:"progressToken"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != "notifications/progress" {
		return
	}
	tok, ok := n.Params.Token.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	if route := p.progress[tok]; route != nil {
		route.seen++
	}
	p.mu.Unlock()
}

// countLog counts msg if it is a log message the SDK will hand to the
// handler: a notification whose params decode.
func (p *Relay) countLog(server string, msg []byte) {
	var n struct {
		ID     json.RawMessage           `json:"id"`
		Method string                    `json:"method"`
		Params *mcp.LoggingMessageParams `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Method != "notifications/message" || n.ID != nil || n.Params == nil {
		return
	}
	p.mu.Lock()
	lc := p.logs[server]
	if lc == nil {
		lc = &logCount{changed: make(chan struct{})}
		p.logs[server] = lc
	}
	lc.seen++
	p.mu.Unlock()
}

// upstreams returns the connected upstreams whose initialize result says
// they serve the feature has reports, starting any that is not running.
func (p *Relay) upstreams(ctx context.Context, has func(*mcp.ServerCapabilities) bool) []*upstream.Server {
	var out []*upstream.Server
	for _, srv := range p.host.Upstreams() {
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
			p.log.Warn("passthrough: upstream unavailable", "server", srv.Name(), "error", err)
			continue
		}
		if caps != nil && has(caps) {
			out = append(out, srv)
		}
	}
	return out
}

// admit asks the host whether a server is admitted; a refused server's
// resources, prompts and completions are hidden like a hidden tool.
func (p *Relay) admit(ctx context.Context, server string) error {
	return p.host.Admit(ctx, server)
}

func hasResources(c *mcp.ServerCapabilities) bool { return c.Resources != nil }

func hasPrompts(c *mcp.ServerCapabilities) bool { return c.Prompts != nil }

func hasLogging(c *mcp.ServerCapabilities) bool { return c.Logging != nil }

// fanOut runs f for each server concurrently with the request's session
// tracked, and returns the results in server order; a failing upstream is
// left out with a warning.
func fanOut[T any](ctx context.Context, p *Relay, ss *mcp.ServerSession, servers []*upstream.Server, f func(ctx context.Context, server string, cs *mcp.ClientSession) (T, error)) []T {
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
				p.log.Warn("passthrough: upstream list failed; its entries are left out", "server", srv.Name(), "error", err)
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

// relayErr is an upstream's JSON-RPC error unchanged, or an internal error.
func relayErr(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// relayNil relays a client's JSON-RPC error to the upstream unchanged.
func relayNil(err error) error {
	if err == nil {
		return nil
	}
	return relayErr(err)
}

// The placeholders are never listed; their handlers only exist because the
// SDK requires one.
func PlaceholderToolHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("not a tool")
}

func PlaceholderPromptHandler(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, errors.New("not a prompt")
}

func PlaceholderResourceHandler(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, mcp.ResourceNotFoundError(req.Params.URI)
}
