// Package gateway is the MCP server the LLM sees: the meta-tools
// search_tools, call_tool and load_mcp_server over the upstream servers,
// with the discovery gate and the filter pipelines wired around them, served
// over stdio or streamable HTTP.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/catcache"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gate"
	"github.com/toolgate/toolgate/internal/oauthclient"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/search"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Version is reported as the gateway's implementation version.
var Version = "dev"

// Options configure a Gateway.
type Options struct {
	Config   *config.Config
	StateDir string
	Logger   *slog.Logger
	// Extensions are the caller's own, run after the built-in ones.
	Extensions []extension.Extension
	// Index ranks tools (default: the lexical BM25 index).
	Index search.Index
	// Gate records what each session was shown (default: in memory).
	Gate gate.Store
	// ConnectTimeout and CallTimeout override the upstream defaults.
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
	// Tokens is the tokens file (nil: no tokens).
	Tokens *secrets.Tokens
	// Redactor masks known secrets in everything sent to the client.
	Redactor *secrets.Redactor
	// UpstreamTransport, if set and it returns a transport, reaches a
	// server through it instead of its command or URL (tests, benchmarks,
	// programs embedding servers in process).
	UpstreamTransport func(cfg *config.Server) mcp.Transport
	// StartInBackground makes New return before the configured servers are
	// connected and indexed: a server that is slow or never answers does
	// not hold up the client's initialize. Their tools appear as each
	// server comes up (see WaitStarted and Starting). Without it, New
	// returns once every server has been tried (one-off commands).
	StartInBackground bool
	// StartConcurrency is how many configured servers connect at once;
	// 0 is four per core, at least eight.
	StartConcurrency int
	// SDKCalls sends every tool call through the SDK client, also to
	// servers with a raw leg (stdio): the tests that compare the two legs.
	SDKCalls bool
}

// Gateway is a running toolgate instance.
type Gateway struct {
	noRaw bool // Options.SDKCalls
	// undecoded counts the results answered as the upstream's bytes,
	// without decoding them (forwardable; the tests check the path).
	undecoded atomic.Uint64
	// rawCalls counts the tool calls sent on a raw leg (the tests check
	// that the leg is taken).
	rawCalls atomic.Uint64

	// httpPeeled counts the tool calls the HTTP frontend's relay answered
	// (the tests check which path a call took); httpSessions is the
	// session limiter of the HTTP handler made last.
	httpPeeled   atomic.Uint64
	httpSessions atomic.Pointer[sessionLimiter]

	cfg              *config.Config
	log              *slog.Logger
	stateDir         string
	startConcurrency int // Options.StartConcurrency

	ups    *upstream.Manager
	idx    search.Index
	cat    *catalog.Catalog
	gate   gate.Store
	signer *gate.Signer
	pipe   *pipeline.Pipeline
	// callPath is the pipeline's call middleware around the upstream
	// stage (call.go), built once.
	callPath extension.CallHandler
	servers  map[scope]*mcp.Server
	pt       *ptMode // passthrough and hybrid modes; nil in meta mode

	sessions sync.Map // *mcp.ServerSession → string key, for sessions without an id

	tokens  *secrets.Tokens
	redact  *secrets.Redactor
	audit   *audit.Log
	metrics *metrics

	ctx    context.Context // lives until Close; used for background re-listing
	cancel context.CancelFunc

	startup startup // configured servers still being connected and indexed

	cache   *catcache.Cache // tool lists of configured servers, for lazy ones
	listMu  sync.Mutex
	listing map[string]*listState // per server: serialises listing

	limits   config.Limits // resolved
	recorded recordedHashes

	// authn authenticates HTTP callers; nil when the config has no "auth".
	authn *auth.Authenticator

	// console is the web console's handler (MountConsole); observer sees
	// every recorded event (Observe).
	console  http.Handler
	observer atomic.Pointer[observer]

	// oauth holds the logins of "toolgate auth login"; nil without a
	// state folder.
	oauth *oauthclient.Source

	// shared is the Redis state backend replicas share; nil for "memory".
	shared *state.Backend
	// replica names this replica in audit records ("" without shared
	// state); stream mirrors them into Redis.
	replica string
	stream  *state.AuditStream
}

// listState serialises the listing of one server, remembers which start
// of it the catalogue reflects, and coalesces its list_changed re-lists.
type listState struct {
	sync.Mutex
	starts  int
	relists *coalescer
}

// New builds a gateway: it provisions the extensions (an extension that
// fails stops startup), then connects every configured server concurrently.
// A server that fails to start or list its tools is skipped with a warning.
func New(ctx context.Context, opts Options) (_ *Gateway, err error) {
	if opts.Config == nil {
		return nil, errors.New("gateway: no config")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: opts.Config, log: log, stateDir: opts.StateDir, startConcurrency: opts.StartConcurrency, gate: opts.Gate, tokens: opts.Tokens, redact: opts.Redactor,
		cache: catcache.New(opts.StateDir), listing: map[string]*listState{}, metrics: newMetrics(), noRaw: opts.SDKCalls}
	defer func() {
		if err != nil {
			g.closeShared()
		}
	}()
	// With a shared state backend the discovery records, the token key and
	// the extensions' decision state live in Redis (see internal/state).
	if g.shared, err = state.Open(ctx, opts.Config.State, log.With("component", "state")); err != nil {
		return nil, err
	}
	if g.shared != nil {
		g.replica = g.shared.Replica()
		g.cache.Share(g.shared)
	}
	if g.shared != nil && g.gate == nil {
		g.gate = gate.NewRedis(g.shared, opts.Config.HTTP.SessionIdle())
	}
	if g.gate == nil {
		g.gate = gate.NewMemory()
	}
	if opts.StateDir != "" {
		g.oauth = oauthclient.NewSource(oauthclient.OpenStore(opts.StateDir), nil, log)
		g.oauth.Secret = g.redact.Add
	}
	idx := opts.Index
	if idx == nil {
		idx = search.NewLexical()
	}
	if opts.StateDir == "" {
		g.cat = catalog.New(idx)
	} else {
		// Full tool definitions live in a file in the state folder; the
		// heap holds what search and routing need.
		cat, err := catalog.Open(idx, opts.StateDir, log)
		if err != nil {
			return nil, err
		}
		g.cat = cat
	}
	g.idx = idx
	g.setLimits(opts.Config.Limits)

	var key []byte
	if g.shared != nil {
		key, err = gate.SharedKey(ctx, g.shared)
	} else {
		key, err = gate.LoadOrCreateKey(filepath.Join(opts.StateDir, "gate.key"))
	}
	if err != nil {
		return nil, err
	}
	if g.signer, err = gate.NewSigner(key, gate.DefaultTokenTTL); err != nil {
		return nil, err
	}

	if opts.Config.Auth.Enabled() {
		if g.authn, err = auth.New(opts.Config.Auth, auth.Options{Logger: log.With("component", "auth")}); err != nil {
			return nil, err
		}
	}
	if err := g.openAudit(); err != nil {
		return nil, err
	}
	builtins, err := builtinExtensions(opts.Config, log)
	if err != nil {
		return nil, err
	}
	host := func(id string) extension.Host {
		return extension.Host{Logger: log.With("extension", extension.Name(id)), ConfigDir: opts.Config.Dir, StateDir: opts.StateDir, Emit: g.emit, Tools: g.toolRefs}
	}
	if g.pipe, err = pipeline.Build(state.WithBackend(ctx, g.shared), log, host, builtins, opts.Extensions); err != nil {
		return nil, err
	}
	g.buildCallPath()

	g.ctx, g.cancel = context.WithCancel(context.Background())
	uopts := upstream.Options{
		Logger:           log,
		OnToolsChanged:   g.relist,
		OnStarted:        g.started,
		OnEgress:         g.egressEvent,
		ConnectTimeout:   opts.ConnectTimeout,
		CallTimeout:      opts.CallTimeout,
		Token:            g.token,
		ResolveCommand:   g.resolveCommand,
		Transport:        opts.UpstreamTransport,
		MaxResponseBytes: opts.Config.MaxResponseBytes,
	}
	if m := opts.Config.Mode; m == config.ModePassthrough || m == config.ModeHybrid {
		g.pt = newPassthrough(g, opts.Config)
		uopts.ClientOptions = g.pt.ClientOptions
		uopts.ClientMiddleware = g.pt.ClientMiddleware
		uopts.OnMessage = g.pt.OnUpstreamMessage
	}
	g.ups = upstream.NewManager(uopts)
	g.metrics.serverLabel = g.metricServer
	g.servers = map[scope]*mcp.Server{}
	for _, s := range []scope{scopeConnection, scopeStateless} {
		if opts.Config.Mode == config.ModePassthrough {
			g.servers[s], err = g.newPassthroughServer(s)
		} else {
			g.servers[s], err = g.newMCPServer(s)
			if err == nil && g.pt != nil {
				g.addPinned(g.servers[s], s)
			}
		}
		if err != nil {
			g.Close()
			return nil, err
		}
		g.seal(g.servers[s])
	}
	if ign := opts.Config.Ignored; len(ign) > 0 {
		log.Info("config: ignoring settings of other MCP clients", "keys", strings.Join(ign, ","))
	}
	g.followLoads()
	if opts.StartInBackground {
		// The client's context may be short (a request's); the startup
		// lives as long as the gateway.
		g.startConfigured(g.ctx, true)
	} else {
		g.startConfigured(ctx, false)
	}
	return g, nil
}

// DefaultOn are the protections every gateway runs, with their defaults,
// unless the config turns one off with `"key": false` in filters.
var DefaultOn = []string{"shadowing", "name_similarity", "version_pinning", "tool_poisoning"}

// builtinExtensions instantiates the extension registered for every key of
// the filters object other than similarity_threshold, in the file's order,
// then the DefaultOn protections the config does not mention.
func builtinExtensions(cfg *config.Config, log *slog.Logger) ([]extension.Extension, error) {
	keys := cfg.Filters.Order
	if len(keys) != len(cfg.Filters.Extensions) { // a config built in code
		keys = keys[:0:0]
		for k := range cfg.Filters.Extensions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	raws := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		raws[k] = cfg.Filters.Extensions[k]
	}
	for _, k := range DefaultOn {
		if _, set := raws[k]; !set {
			if _, registered := extension.Lookup(k); registered {
				keys = append(keys, k)
				raws[k] = json.RawMessage("{}")
			}
		}
	}
	var out []extension.Extension
	for _, k := range keys {
		raw := raws[k]
		f, renamed, ok := extension.LookupName(k)
		if ok && renamed != "" {
			log.Warn("config: a filters key is deprecated; use its new name", "key", k, "name", renamed)
		}
		if !ok {
			hint := ""
			if s := config.Suggest(k, append(extension.Keys(), "similarity_threshold", "egress")); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			return nil, &config.Error{File: cfg.Path, Msg: fmt.Sprintf("filters: unknown key %q%s (known: similarity_threshold, egress, %v)", k, hint, extension.Keys())}
		}
		if string(bytes.TrimSpace(raw)) == "false" {
			continue
		}
		e, err := f(raw)
		if err != nil {
			return nil, &config.Error{File: cfg.Path, Msg: fmt.Sprintf("filters.%s: %v", k, err)}
		}
		out = append(out, e)
	}
	return out, nil
}

// startConfigured connects and indexes every configured server
// concurrently. In the background it returns at once; each server leaves
// the starting set when it is indexed or has failed.
func (g *Gateway) startConfigured(ctx context.Context, background bool) {
	names := make([]string, 0, len(g.cfg.Servers))
	for n, s := range g.cfg.Servers {
		if s.Disabled {
			if s.DisabledReason != "" {
				g.log.Warn("server disabled; not started, the others are", "server", n, "reason", s.DisabledReason)
			} else {
				g.log.Info("server disabled in config; not started", "server", n)
			}
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var srvs []*upstream.Server
	for _, n := range names {
		srv, err := g.ups.Add(g.cfg.Servers[n])
		if err != nil {
			g.log.Warn("skipping server", "server", n, "error", err)
			continue
		}
		srvs = append(srvs, srv)
	}
	g.startup.begin(len(srvs))
	for _, srv := range srvs {
		g.startup.add(srv.Name())
	}
	// A bounded pool: a hundred stdio servers started at once on a small
	// machine compete for the CPU until their connect timeouts fire.
	sem := make(chan struct{}, g.startLimit())
	for _, srv := range srvs {
		go func() {
			n := srv.Name()
			defer g.serverStarted(n)
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			if err := g.indexConfigured(ctx, srv); err != nil && ctx.Err() == nil {
				g.log.Warn("skipping server: it failed to start or list its tools; the others keep working", "server", n, "error", err)
			}
		}()
	}
	done := func() {
		g.startup.wg.Wait()
		g.log.Info("gateway ready", "servers", len(g.ups.Servers()), "tools", g.cat.Len())
	}
	if background {
		go done()
		return
	}
	done()
}

// startLimit is how many configured servers connect at once: four per
// core, at least eight (connecting is mostly waiting on the upstream).
func (g *Gateway) startLimit() int {
	if g.startConcurrency > 0 {
		return g.startConcurrency
	}
	return max(8, 4*runtime.GOMAXPROCS(0))
}

// indexConfigured puts a configured server's tools in the catalogue. A lazy
// server's come from the catalogue cache without starting it; with no cache
// entry for its config, it is started once to list them, then stopped.
func (g *Gateway) indexConfigured(ctx context.Context, srv *upstream.Server) error {
	cfg := srv.Config()
	if !cfg.Lazy {
		if err := g.index(ctx, srv, 0); err != nil {
			return err
		}
		g.log.Info("indexed server", "server", srv.Name(), "tools", g.toolCount(srv.Name()))
		return nil
	}
	e, ok, err := g.cache.Load(cfg)
	if err != nil {
		g.log.Warn("catalogue cache unreadable; listing the server instead", "server", srv.Name(), "error", err)
	}
	if ok {
		if _, err := g.catalogue(ctx, srv.Name(), e.Tools, false); err != nil {
			return err
		}
		g.log.Info("indexed lazy server from the catalogue cache; it starts on first call", "server", srv.Name(), "tools", g.toolCount(srv.Name()), "cached", e.Updated.Format(time.RFC3339))
		return nil
	}
	err = g.index(ctx, srv, 0)
	srv.Stop()
	if err == nil {
		g.log.Info("indexed lazy server; stopped until its first call", "server", srv.Name(), "tools", g.toolCount(srv.Name()))
	}
	return err
}

// index lists srv's tools, puts them in the catalogue and, for a configured
// server, in the catalogue cache. Listings of one server are serialised;
// with after > 0 it does nothing if the catalogue already reflects that
// start of the server (or a later one).
func (g *Gateway) index(ctx context.Context, srv *upstream.Server, after int) error {
	name := srv.Name()
	ls := g.listStateOf(name)
	ls.Lock()
	defer ls.Unlock()
	var tools []*mcp.Tool
	var err error
	if after > 0 {
		if ls.starts >= after {
			return nil
		}
		// A refresh after a start: if the server has already stopped
		// again, it is not started just to be listed.
		var running bool
		if tools, running, err = srv.ListToolsIfRunning(ctx); !running {
			return err
		}
	} else {
		tools, err = srv.ListTools(ctx)
	}
	if err != nil {
		return err
	}
	ls.starts = srv.Status().Starts
	tools = g.refuseSecretNames(ctx, name, tools) // before the cache writes them
	if _, err := g.catalogue(ctx, name, tools, g.runTime(name)); err != nil {
		// Over a limit: none of its tools stay, not even the earlier ones
		// (they may be what the server no longer serves).
		g.cat.RemoveServer(name)
		return err
	}
	if cfg, ok := g.cfg.Servers[name]; ok && cfg == srv.Config() {
		if err := g.cache.Save(cfg, tools); err != nil {
			g.log.Warn("catalogue cache not updated", "server", name, "error", err)
		}
	}
	// Startup (indexConfigured) and load_mcp_server report the result
	// once; re-lists are routine.
	g.log.Debug("listed server", "server", name, "listed", len(tools))
	return nil
}

// started refreshes the catalogue (and cache) of a server that has just
// started, unless that start came from listing it: a lazy server's cached
// tools, or a restarted server's, may be out of date.
func (g *Gateway) started(name string, starts int) {
	if starts == 1 && g.runTime(name) {
		return // load_mcp_server lists it itself
	}
	srv, ok := g.ups.Get(name)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, upstream.DefaultConnectTimeout)
	defer cancel()
	if err := g.index(ctx, srv, starts); err != nil && g.ctx.Err() == nil {
		g.log.Warn("re-listing tools after a start failed", "server", name, "error", err)
	}
}

// resolveCommand asks the extensions that pin executables which file a
// stdio server must run.
func (g *Gateway) resolveCommand(ctx context.Context, cfg *config.Server) (string, error) {
	for _, e := range g.pipe.Extensions() {
		if r, ok := e.(extension.CommandResolver); ok {
			path, err := r.ResolveCommand(ctx, cfg.Name, cfg.Command, cfg.Dir)
			if err != nil {
				return "", fmt.Errorf("%s: %w", e.ID(), err)
			}
			if path != "" {
				return path, nil
			}
		}
	}
	return "", nil
}

// runTime reports whether a server was connected by load_mcp_server.
func (g *Gateway) runTime(name string) bool {
	_, configured := g.cfg.Servers[name]
	return !configured
}

// toolRefs is the catalogue snapshot extensions see.
func (g *Gateway) toolRefs() []extension.ToolRef {
	all := g.cat.All()
	out := make([]extension.ToolRef, len(all))
	for i, t := range all {
		out[i] = extension.ToolRef{Server: t.Server, Def: t.Def()}
	}
	return out
}

// WaitIndexed blocks until every known tool is in the semantic index (a
// no-op for the lexical index) or ctx ends.
func (g *Gateway) WaitIndexed(ctx context.Context) error {
	if b, ok := g.idx.(search.Background); ok {
		return b.Wait(ctx)
	}
	return nil
}

// Catalog exposes the tool registry (for the CLI and tests).
func (g *Gateway) Catalog() *catalog.Catalog { return g.cat }

// Upstreams exposes the upstream manager (for status).
func (g *Gateway) Upstreams() *upstream.Manager { return g.ups }

// Close stops every upstream and closes the extensions.
func (g *Gateway) Close() error {
	if g.cancel != nil {
		g.cancel()
	}
	var errs []error
	if g.ups != nil {
		errs = append(errs, g.ups.Close())
	}
	// Servers still starting in the background end with their upstreams;
	// they must not catalogue or record anything after the audit log and
	// the extensions are closed.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = g.WaitStarted(wctx)
	wcancel()
	if g.pipe != nil {
		errs = append(errs, g.pipe.Close())
	}
	if c, ok := g.idx.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	errs = append(errs, g.cat.Close())
	if g.audit != nil {
		errs = append(errs, g.audit.Close())
	}
	g.closeShared()
	return errors.Join(errs...)
}

// closeShared closes the Redis client, once the extensions that use it are
// closed.
func (g *Gateway) closeShared() {
	if g.stream != nil {
		g.stream.Close()
		g.stream = nil
	}
	if g.shared != nil {
		_ = g.shared.Close()
		g.shared = nil
	}
}
