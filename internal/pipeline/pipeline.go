// Package pipeline runs the filter chains of toolgate's operations (search,
// call, load, response) over a set of provisioned extensions, in phase
// order. A filter that fails without deciding, or panics, denies the
// operation: the pipeline fails closed.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
)

// Pipeline is an immutable set of provisioned extensions and their filters.
type Pipeline struct {
	log      *slog.Logger
	exts     []extension.Extension
	search   []stage[extension.SearchFilter]
	call     []stage[extension.CallFilter]
	load     []stage[extension.LoadFilter]
	response []stage[extension.ResponseFilter]
	list     []stage[extension.ListFilter]
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
			h.Logger = log.With("extension", e.ID())
		}
		if h.Tools == nil {
			h.Tools = func() []extension.ToolRef { return nil }
		}
		if err := safe(func() error { return e.Provision(ctx, h) }); err != nil {
			p.Close()
			return nil, fmt.Errorf("extension %s: provision: %w", e.ID(), err)
		}
		p.exts = append(p.exts, e)
	}
	for _, e := range p.exts {
		if err := safe(e.Validate); err != nil {
			p.Close()
			return nil, fmt.Errorf("extension %s: validate: %w", e.ID(), err)
		}
	}
	// Stable sort keeps builtins before extras and config order inside a phase.
	ordered := append([]extension.Extension{}, p.exts...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Phase() < ordered[j].Phase() })
	for _, e := range ordered {
		id := e.ID()
		if f := e.SearchFilter(); f != nil {
			p.search = append(p.search, stage[extension.SearchFilter]{id, f})
		}
		if f := e.CallFilter(); f != nil {
			p.call = append(p.call, stage[extension.CallFilter]{id, f})
		}
		if f := e.LoadFilter(); f != nil {
			p.load = append(p.load, stage[extension.LoadFilter]{id, f})
		}
		if f := e.ResponseFilter(); f != nil {
			p.response = append(p.response, stage[extension.ResponseFilter]{id, f})
		}
		if f := e.ListFilter(); f != nil {
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
		if err := safe(p.exts[i].Close); err != nil {
			errs = append(errs, fmt.Errorf("extension %s: close: %w", p.exts[i].ID(), err))
		}
	}
	p.exts = nil
	return errors.Join(errs...)
}

// SearchFilters is the number of search filters: with none, a search
// need not read more tool definitions than it returns.
func (p *Pipeline) SearchFilters() int { return len(p.search) }

// Search passes results through every search filter.
func (p *Pipeline) Search(ctx context.Context, req *extension.SearchRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
	for _, s := range p.search {
		var out []extension.SearchResult
		err := safe(func() (err error) { out, err = s.f(ctx, req, results); return err })
		if err != nil {
			return nil, p.denial(s.id, "search", err)
		}
		results = out
	}
	return results, nil
}

// Call runs the call filters; a non-nil error is a *extension.Denial.
func (p *Pipeline) Call(ctx context.Context, req *extension.CallRequest) error {
	for _, s := range p.call {
		if err := safe(func() error { return s.f(ctx, req) }); err != nil {
			return p.denial(s.id, "call", err)
		}
	}
	return nil
}

// Load runs the load filters; a non-nil error is a *extension.Denial.
func (p *Pipeline) Load(ctx context.Context, req *extension.LoadRequest) error {
	for _, s := range p.load {
		if err := safe(func() error { return s.f(ctx, req) }); err != nil {
			return p.denial(s.id, "load", err)
		}
	}
	return nil
}

// List passes a server's tool list through the list filters.
func (p *Pipeline) List(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	for _, s := range p.list {
		var out []*mcp.Tool
		err := safe(func() (err error) { out, err = s.f(ctx, req, tools); return err })
		if err != nil {
			return nil, p.denial(s.id, "list", err)
		}
		tools = out
	}
	return tools, nil
}

// Response passes an upstream result through the response filters.
func (p *Pipeline) Response(ctx context.Context, req *extension.CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	for _, s := range p.response {
		var out *mcp.CallToolResult
		err := safe(func() (err error) { out, err = s.f(ctx, req, res); return err })
		if err != nil {
			return nil, p.denial(s.id, "response", err)
		}
		if out != nil {
			res = out
		}
	}
	return res, nil
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
	p.log.Error("filter failed; refusing (fail closed)", "extension", id, "pipeline", op, "error", err)
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
