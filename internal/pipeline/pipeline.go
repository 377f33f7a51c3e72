// Package pipeline runs the filters and call middleware of toolgate's
// operations (search, list, load, call) over a set of provisioned
// extensions, in phase order. A filter or middleware that fails without
// deciding, or panics, denies the operation: the pipeline fails closed.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
)

// Pipeline is an immutable set of provisioned extensions and their filters.
type Pipeline struct {
	log     *slog.Logger
	exts    []extension.Extension
	visible []stage[extension.VisibilityFilter]
	search  []stage[extension.SearchFilter]
	call    []stage[extension.CallMiddleware]
	load    []stage[extension.LoadFilter]
	list    []stage[extension.ListFilter]
	// prefetch are the call middleware deciding on shared state, asked
	// for their scripts before a call enters the chain (see
	// state.CallBatch).
	prefetch []state.CallPrefetcher
}

type stage[F any] struct {
	id string
	f  F
}

// Build validates identifiers, provisions every extension in order, then
// validates each. builtins come from the config and run before extra (the
// caller's own) inside each phase. On error every extension already
// provisioned is closed and the error names the one that failed.
func Build(ctx context.Context, log *slog.Logger, host func(id string) extension.Host, builtins, extra []extension.Extension) (*Pipeline, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all := append(append([]extension.Extension{}, builtins...), extra...)
	seen := map[string]bool{}
	for _, e := range all {
		if e == nil {
			return nil, errors.New("extension: nil extension")
		}
		id := e.ID()
		if err := extension.ValidateID(id); err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fmt.Errorf("extension %s: registered twice", id)
		}
		seen[id] = true
	}
	p := &Pipeline{log: log}
	for _, e := range all {
		h := host(e.ID())
		if h.Emit == nil {
			h.Emit = func(context.Context, extension.Event) {}
		}
		if h.Logger == nil {
			h.Logger = log.With("extension", extension.Name(e.ID()))
		}
		if h.Tools == nil {
			h.Tools = func() []extension.ToolRef { return nil }
		}
		if pr, ok := e.(extension.Provisioner); ok {
			if err := safe(func() error { return pr.Provision(ctx, h) }); err != nil {
				p.Close()
				return nil, fmt.Errorf("extension %s: provision: %w", e.ID(), err)
			}
		}
		p.exts = append(p.exts, e)
	}
	for _, e := range p.exts {
		if v, ok := e.(extension.Validator); ok {
			if err := safe(v.Validate); err != nil {
				p.Close()
				return nil, fmt.Errorf("extension %s: validate: %w", e.ID(), err)
			}
		}
	}
	// Stable sort keeps builtins before extras and config order inside a phase.
	ordered := append([]extension.Extension{}, p.exts...)
	sort.SliceStable(ordered, func(i, j int) bool { return extension.PhaseOf(ordered[i]) < extension.PhaseOf(ordered[j]) })
	for _, e := range ordered {
		id := e.ID()
		if f, ok := e.(extension.VisibilityFilter); ok {
			p.visible = append(p.visible, stage[extension.VisibilityFilter]{id, f})
		}
		if f, ok := e.(extension.SearchFilter); ok {
			p.search = append(p.search, stage[extension.SearchFilter]{id, f})
		}
		if f, ok := e.(extension.CallMiddleware); ok {
			p.call = append(p.call, stage[extension.CallMiddleware]{id, f})
			if pf, ok := e.(state.CallPrefetcher); ok {
				p.prefetch = append(p.prefetch, pf)
			}
		}
		if f, ok := e.(extension.LoadFilter); ok {
			p.load = append(p.load, stage[extension.LoadFilter]{id, f})
		}
		if f, ok := e.(extension.ListFilter); ok {
			p.list = append(p.list, stage[extension.ListFilter]{id, f})
		}
	}
	return p, nil
}

// Extensions returns the provisioned extensions in registration order.
func (p *Pipeline) Extensions() []extension.Extension { return p.exts }

// Close closes every extension in reverse order.
func (p *Pipeline) Close() error {
	var errs []error
	for i := len(p.exts) - 1; i >= 0; i-- {
		c, ok := p.exts[i].(extension.Closer)
		if !ok {
			continue
		}
		if err := safe(c.Close); err != nil {
			errs = append(errs, fmt.Errorf("extension %s: close: %w", p.exts[i].ID(), err))
		}
	}
	p.exts = nil
	return errors.Join(errs...)
}

// SearchFilters is the number of search filters: with none, a search
// need not read more tool definitions than it returns.
func (p *Pipeline) SearchFilters() int { return len(p.search) }

// Visible passes tools through every visibility filter.
func (p *Pipeline) Visible(ctx context.Context, req *extension.VisibilityRequest, tools []extension.SearchResult) ([]extension.SearchResult, error) {
	tr := TraceFrom(ctx)
	for _, s := range p.visible {
		var out []extension.SearchResult
		// A filter may drop results in place (slices.DeleteFunc): the
		// names are taken before it runs.
		var before []string
		if tr != nil {
			before = names(tools)
		}
		start := time.Now()
		err := safe(func() (err error) { out, err = s.f.FilterVisible(ctx, req, tools); return err })
		if tr != nil {
			v, rule := verdict(err)
			tr.add(Step{Extension: s.id, Pipeline: "visible", Verdict: v, Rule: rule, Duration: time.Since(start), Hid: hidden(before, out)})
		}
		if err != nil {
			return nil, p.denial(s.id, "visible", err)
		}
		tools = out
	}
	return tools, nil
}

// Search passes a search's results through the visibility filters, then
// every search filter.
func (p *Pipeline) Search(ctx context.Context, req *extension.SearchRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
	results, err := p.Visible(ctx, &extension.VisibilityRequest{Session: req.Session, Principal: req.Principal, Limit: req.TopK}, results)
	if err != nil {
		return nil, err
	}
	tr := TraceFrom(ctx)
	for _, s := range p.search {
		var out []extension.SearchResult
		var before []string
		if tr != nil {
			before = names(results)
		}
		start := time.Now()
		err := safe(func() (err error) { out, err = s.f.FilterSearch(ctx, req, results); return err })
		if tr != nil {
			v, rule := verdict(err)
			tr.add(Step{Extension: s.id, Pipeline: "search", Verdict: v, Rule: rule, Duration: time.Since(start), Hid: hidden(before, out)})
		}
		if err != nil {
			return nil, p.denial(s.id, "search", err)
		}
		results = out
	}
	return results, nil
}

// Load runs the load filters; a non-nil error is a *extension.Denial.
func (p *Pipeline) Load(ctx context.Context, req *extension.LoadRequest) error {
	for _, s := range p.load {
		if err := safe(func() error { return s.f.FilterLoad(ctx, req) }); err != nil {
			return p.denial(s.id, "load", err)
		}
	}
	return nil
}

// List passes a server's tool list through the list filters.
func (p *Pipeline) List(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	for _, s := range p.list {
		var out []*mcp.Tool
		err := safe(func() (err error) { out, err = s.f.FilterList(ctx, req, tools); return err })
		if err != nil {
			return nil, p.denial(s.id, "list", err)
		}
		tools = out
	}
	return tools, nil
}

// nextTimerKey carries, per call and stage, the time spent in the stage's
// next, so a trace shows each middleware's own time.
type nextTimerKey struct{}

// fromNext marks an error that a middleware's next returned, so that the
// stage passes it on as it is instead of blaming the middleware for it.
type fromNext struct{ err error }

func (f *fromNext) Error() string { return f.err.Error() }
func (f *fromNext) Unwrap() error { return f.err }

// Wrap returns h wrapped in every call middleware, in phase order (the
// first is the outermost). Build it once and reuse it: it is safe for
// concurrent use. An error the handler returns is either what h returned,
// unchanged, or a *extension.Denial from a middleware: one that refused,
// failed without deciding, panicked or returned no result.
func (p *Pipeline) Wrap(h extension.CallHandler) extension.CallHandler {
	for i := len(p.call) - 1; i >= 0; i-- {
		h = p.wrapStage(p.call[i], h)
	}
	if len(p.prefetch) == 0 {
		return h
	}
	chain := h
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		return chain(p.prefetchCall(ctx, req), req)
	}
}

// prefetchCall fetches what the middleware needs from the shared state in
// one round trip, before the call enters the chain; the middleware finds
// the answers in the returned context.
func (p *Pipeline) prefetchCall(ctx context.Context, req *extension.CallRequest) context.Context {
	var batch state.CallBatch
	for _, pf := range p.prefetch {
		pf.PrefetchCall(ctx, req, &batch)
	}
	if batch.Len() == 0 {
		return ctx
	}
	batch.Exec(ctx)
	return state.WithBatch(ctx, &batch)
}

func (p *Pipeline) wrapStage(s stage[extension.CallMiddleware], next extension.CallHandler) extension.CallHandler {
	inner := func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		if t, ok := ctx.Value(nextTimerKey{}).(*time.Duration); ok {
			start := time.Now()
			defer func() { *t += time.Since(start) }()
		}
		res, err := next(ctx, req)
		if err != nil {
			return res, &fromNext{err}
		}
		return res, nil
	}
	var h extension.CallHandler
	if err := safe(func() error { h = s.f.WrapCall(inner); return nil }); err != nil || h == nil {
		if err == nil {
			err = errors.New("WrapCall returned no handler")
		}
		d := p.denial(s.id, "call", err)
		return func(context.Context, *extension.CallRequest) (*extension.CallResult, error) { return nil, d }
	}
	return func(ctx context.Context, req *extension.CallRequest) (res *extension.CallResult, err error) {
		// own is the middleware's own outcome, before it is made a Denial.
		var own error
		downstream := false
		tr := TraceFrom(ctx)
		if tr != nil {
			// The step's time is the middleware's own: what it spent in
			// next (the rest of the chain and the upstream) is taken out.
			var inNext time.Duration
			ctx = context.WithValue(ctx, nextTimerKey{}, &inNext)
			slot := tr.begin(Step{Extension: s.id, Pipeline: "call", Verdict: "pass"})
			start := time.Now()
			defer func() {
				v, rule := verdict(own)
				if downstream {
					// An error from further down the chain is not this
					// middleware's verdict.
					v, rule = "pass", ""
				}
				tr.set(slot, Step{Extension: s.id, Pipeline: "call", Verdict: v, Rule: rule, Duration: time.Since(start) - inNext})
			}()
		}
		err = safe(func() (err error) { res, err = h(ctx, req); return err })
		own = err
		if err != nil {
			if fn, ok := errors.AsType[*fromNext](err); ok {
				downstream = true
				return res, fn.err
			}
			return nil, p.denial(s.id, "call", err)
		}
		if res == nil {
			own = errors.New("the middleware returned neither a result nor an error")
			return nil, p.denial(s.id, "call", own)
		}
		return res, nil
	}
}

// Decide runs the call middleware for a call that is judged but not run
// (a tool call in an LLM response): nil means every middleware passed it
// on, and rewritten is the request the end of the chain saw.
func (p *Pipeline) Decide(ctx context.Context, req *extension.CallRequest) (rewritten *extension.CallRequest, err error) {
	seen := req
	h := p.Wrap(func(_ context.Context, r *extension.CallRequest) (*extension.CallResult, error) {
		seen = r
		return extension.NewCallResult(&mcp.CallToolResult{Content: []mcp.Content{}}), nil
	})
	if _, err := h(ctx, req); err != nil {
		return nil, err
	}
	return seen, nil
}

// denial turns a filter's error into a Denial. An error that is not a
// Denial means the filter could not decide; the operation is refused with a
// generic reason and the error goes to the log only.
func (p *Pipeline) denial(id, op string, err error) error {
	if d, ok := extension.AsDenial(err); ok {
		if d.Rule == "" {
			d.Rule = id
		}
		return d
	}
	p.log.Error("filter failed; refusing (fail closed)", "extension", extension.Name(id), "pipeline", op, "error", err)
	return &extension.Denial{
		Rule:   id,
		Reason: "a policy check failed to complete, so the operation was refused",
		Detail: err.Error(),
		Code:   extension.CodePermissionDenied,
	}
}

// safe runs f and turns a panic into an error.
func safe(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return f()
}

// names lists the results' tool names.
func names(rs []extension.SearchResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// hidden names the tools of before that a search filter left out of after.
func hidden(before []string, after []extension.SearchResult) []string {
	kept := make(map[string]bool, len(after))
	for _, r := range after {
		kept[r.Name] = true
	}
	var out []string
	for _, n := range before {
		if !kept[n] {
			out = append(out, n)
		}
	}
	return out
}

// asDenial reports a denial's rule (empty when the filter set none).
func asDenial(err error) (string, bool) {
	d, ok := extension.AsDenial(err)
	if !ok {
		return "", false
	}
	return d.Rule, true
}
