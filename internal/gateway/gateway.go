// Package gateway is the MCP server the LLM sees: the meta-tools
// search_tools, call_tool and load_mcp_server over the upstream servers,
// with the discovery gate and the filter pipelines wired around them, served
// over stdio or streamable HTTP.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gate"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/search"
	"github.com/toolgate/toolgate/internal/secrets"
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
}

// Gateway is a running toolgate instance.
type Gateway struct {
	cfg      *config.Config
	log      *slog.Logger
	stateDir string

	ups     *upstream.Manager
	idx     search.Index
	cat     *catalog.Catalog
	gate    gate.Store
	signer  *gate.Signer
	pipe    *pipeline.Pipeline
	servers map[scope]*mcp.Server

	sessions sync.Map // *mcp.ServerSession → string key, for sessions without an id

	tokens *secrets.Tokens
	redact *secrets.Redactor
	audit  *audit.Log

	ctx    context.Context // lives until Close; used for background re-listing
	cancel context.CancelFunc
}

// New builds a gateway: it provisions the extensions (an extension that
// fails stops startup), then connects every configured server concurrently.
// A server that fails to start or list its tools is skipped with a warning.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Config == nil {
		return nil, errors.New("gateway: no config")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: opts.Config, log: log, stateDir: opts.StateDir, gate: opts.Gate, tokens: opts.Tokens, redact: opts.Redactor}
	if g.gate == nil {
		g.gate = gate.NewMemory()
	}
	idx := opts.Index
	if idx == nil {
		idx = search.NewLexical()
	}
	g.cat = catalog.New(idx)
	g.idx = idx

	key, err := gate.LoadOrCreateKey(filepath.Join(opts.StateDir, "gate.key"))
	if err != nil {
		return nil, err
	}
	if g.signer, err = gate.NewSigner(key, gate.DefaultTokenTTL); err != nil {
		return nil, err
	}

	if err := g.openAudit(); err != nil {
		return nil, err
	}
	builtins, err := builtinExtensions(opts.Config)
	if err != nil {
		return nil, err
	}
	host := func(id string) extension.Host {
		return extension.Host{Logger: log.With("extension", id), ConfigDir: opts.Config.Dir, StateDir: opts.StateDir, Emit: g.emit, Tools: g.toolRefs}
	}
	if g.pipe, err = pipeline.Build(ctx, log, host, builtins, opts.Extensions); err != nil {
		return nil, err
	}

	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.ups = upstream.NewManager(upstream.Options{
		Logger:         log,
		OnToolsChanged: g.relist,
		ConnectTimeout: opts.ConnectTimeout,
		CallTimeout:    opts.CallTimeout,
		Token:          g.token,
	})
	g.servers = map[scope]*mcp.Server{}
	for _, s := range []scope{scopeConnection, scopeStateless} {
		if g.servers[s], err = g.newMCPServer(s); err != nil {
			g.Close()
			return nil, err
		}
	}
	g.startConfigured(ctx)
	return g, nil
}

// builtinExtensions instantiates the extension registered for every key of
// the filters object other than similarity_threshold, in the file's order.
func builtinExtensions(cfg *config.Config) ([]extension.Extension, error) {
	keys := cfg.Filters.Order
	if len(keys) != len(cfg.Filters.Extensions) { // a config built in code
		keys = keys[:0:0]
		for k := range cfg.Filters.Extensions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	var out []extension.Extension
	for _, k := range keys {
		f, ok := extension.Lookup(k)
		if !ok {
			return nil, &config.Error{File: cfg.Path, Msg: fmt.Sprintf("filters: unknown key %q (known: similarity_threshold, %v)", k, extension.Keys())}
		}
		e, err := f(cfg.Filters.Extensions[k])
		if err != nil {
			return nil, &config.Error{File: cfg.Path, Msg: fmt.Sprintf("filters.%s: %v", k, err)}
		}
		out = append(out, e)
	}
	return out, nil
}

func (g *Gateway) startConfigured(ctx context.Context) {
	names := make([]string, 0, len(g.cfg.Servers))
	for n, s := range g.cfg.Servers {
		if s.Disabled {
			g.log.Info("server disabled in config; not started", "server", n)
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var wg sync.WaitGroup
	for _, n := range names {
		srv, err := g.ups.Add(g.cfg.Servers[n])
		if err != nil {
			g.log.Warn("skipping server", "server", n, "error", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.index(ctx, srv); err != nil {
				g.log.Warn("skipping server: it failed to start or list its tools; the others keep working", "server", n, "error", err)
			}
		}()
	}
	wg.Wait()
	g.log.Info("gateway ready", "servers", len(g.ups.Servers()), "tools", g.cat.Len())
}

// index lists srv's tools and puts them in the catalogue.
func (g *Gateway) index(ctx context.Context, srv *upstream.Server) error {
	tools, err := srv.ListTools(ctx)
	if err != nil {
		return err
	}
	g.catalogue(ctx, srv.Name(), tools, g.runTime(srv.Name()))
	g.log.Info("indexed server", "server", srv.Name(), "tools", len(tools))
	return nil
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
		out[i] = extension.ToolRef{Server: t.Server, Def: t.Def}
	}
	return out
}

// catalogue passes a server's tools through the list filters, puts what
// is left in the catalogue and records each new or changed definition. A
// list filter that fails hides the whole list (fail closed).
func (g *Gateway) catalogue(ctx context.Context, server string, tools []*mcp.Tool, runTime bool) {
	tools, err := g.pipe.List(ctx, &extension.ListRequest{ServerName: server, RunTime: runTime}, tools)
	if err != nil {
		g.log.Error("list filter refused the server's tools; none are searchable", "server", server, "error", err)
		tools = nil
	}
	changes, err := g.cat.Update(ctx, server, tools)
	if err != nil {
		g.log.Warn("some tools were not indexed", "server", server, "error", err)
	}
	for _, c := range changes {
		if c.Previous == "" {
			g.emit(ctx, extension.Event{Type: audit.ToolSeen, Server: server, Tool: c.Tool.Name, Fields: map[string]any{"tool_hash": c.Tool.Hash, "description": c.Tool.Def.Description}})
		} else {
			g.emit(ctx, extension.Event{Type: audit.ToolChanged, Server: server, Tool: c.Tool.Name, Fields: map[string]any{"previous_hash": c.Previous, "new_hash": c.Tool.Hash}})
		}
	}
}

// relist re-indexes a server after notifications/tools/list_changed.
func (g *Gateway) relist(name string) {
	srv, ok := g.ups.Get(name)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, upstream.DefaultConnectTimeout)
	defer cancel()
	if err := g.index(ctx, srv); err != nil && g.ctx.Err() == nil {
		g.log.Warn("re-listing tools after list_changed failed", "server", name, "error", err)
	}
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
	if g.pipe != nil {
		errs = append(errs, g.pipe.Close())
	}
	if c, ok := g.idx.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	if g.audit != nil {
		errs = append(errs, g.audit.Close())
	}
	return errors.Join(errs...)
}

// jsonText renders v as indented JSON for text content.
func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
