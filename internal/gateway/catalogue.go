package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/passthrough"
	"github.com/toolgate/toolgate/internal/upstream"
)

// setLimits resolves the config's limits and hands the catalogue its part.
func (g *Gateway) setLimits(l config.Limits) {
	g.limits = l.Resolved()
	g.cat.SetLimits(catalog.Limits{
		PerServer: g.limits.MaxToolsPerServer, Total: g.limits.MaxTools,
		NameBytes: g.limits.MaxToolNameBytes, DescriptionBytes: g.limits.MaxDescriptionBytes, SchemaBytes: g.limits.MaxSchemaBytes,
	})
}

// listStateOf returns the listing state of a server, creating it.
func (g *Gateway) listStateOf(name string) *listState {
	g.listMu.Lock()
	defer g.listMu.Unlock()
	ls := g.listing[name]
	if ls == nil {
		ls = &listState{relists: newCoalescer(g.limits.ListChangedPerMinute, config.ListChangedBurst, func() {
			g.log.Warn("upstream sends tools/list_changed faster than limits.list_changed_per_minute; it is re-listed at most that often and the notifications in between are folded into the next re-list",
				"server", name, "list_changed_per_minute", g.limits.ListChangedPerMinute, "burst", config.ListChangedBurst)
		})}
		g.listing[name] = ls
	}
	return ls
}

// HeldTool is a listed tool the model cannot use, and why (a public
// reason: safe to show the model, never a secret).
type HeldTool struct {
	Tool   string `json:"tool"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// ListOutcome is what the gateway made of a server's tool list.
type ListOutcome struct {
	// Listed is how many tools the server listed; Usable how many the
	// model can find and call.
	Listed, Usable int
	// Held are the others: left out of the catalogue, or catalogued but
	// refused at call time (an unpinned definition).
	Held []HeldTool
}

// catalogue checks a server's tools against the limits, passes them
// through the list filters, puts what is left in the catalogue and records
// each new or changed definition (once per definition hash). A list over
// the tool-count limits is refused as a whole (*catalog.TooManyError) and
// changes nothing; a definition over the size limits is left out. A list
// filter that fails hides the whole list (fail closed).
func (g *Gateway) catalogue(ctx context.Context, server string, tools []*mcp.Tool, runTime bool) (ListOutcome, error) {
	out := ListOutcome{Listed: len(tools)}
	tools = g.refuseSecretNames(ctx, server, tools)
	lim := catalog.Limits{PerServer: g.limits.MaxToolsPerServer, NameBytes: g.limits.MaxToolNameBytes,
		DescriptionBytes: g.limits.MaxDescriptionBytes, SchemaBytes: g.limits.MaxSchemaBytes}
	// Checked before the list filters run: pinning, scanning and auditing
	// a list costs in proportion to its size.
	admitted, rejected, err := catalog.Admit(server, tools, lim)
	if err != nil {
		return out, err
	}
	if total := g.cat.Len() - len(g.cat.ServerTools(server)) + len(admitted); total > g.limits.MaxTools {
		return out, &catalog.TooManyError{Server: server, Listed: len(admitted), Key: catalog.KeyTotal, Limit: g.limits.MaxTools, Total: total}
	}
	for i, r := range rejected {
		out.Held = append(out.Held, HeldTool{Tool: r.Tool, Rule: r.Rule, Reason: r.Reason})
		// A few lines per listing, however many tools a hostile list holds.
		if i < 5 {
			g.log.Warn("tool left out of the catalogue", "server", server, "tool", r.Tool, "rule", r.Rule, "reason", r.Reason)
		} else if i == 5 {
			g.log.Warn("more tools left out of the catalogue", "server", server, "count", len(rejected)-5)
		}
	}

	var mu sync.Mutex
	var held []HeldTool
	req := &extension.ListRequest{ServerName: server, RunTime: runTime, Withheld: func(tool, rule, reason string) {
		mu.Lock()
		held = append(held, HeldTool{Tool: tool, Rule: rule, Reason: reason})
		mu.Unlock()
	}}
	kept, err := g.pipe.List(ctx, req, admitted)
	if err != nil {
		g.log.Error("list filter refused the server's tools; none are searchable", "server", server, "error", err)
		kept = nil
		reason := "a list filter failed, so none of the server's tools are shown"
		if d, ok := extension.AsDenial(err); ok {
			reason = d.Reason
		}
		held = held[:0]
		for _, t := range admitted {
			held = append(held, HeldTool{Tool: t.Name, Rule: "list_filter", Reason: reason})
		}
	}
	// One entry per tool: the first reason given. A tool a filter dropped
	// without saying why still gets one.
	inKept := make(map[string]bool, len(kept))
	for _, t := range kept {
		if t != nil {
			inKept[t.Name] = true
		}
	}
	reported := map[string]bool{}
	for _, h := range held {
		if !reported[h.Tool] {
			reported[h.Tool] = true
			out.Held = append(out.Held, h)
		}
	}
	for _, t := range admitted {
		if !inKept[t.Name] && !reported[t.Name] {
			out.Held = append(out.Held, HeldTool{Tool: t.Name, Rule: "list_filter", Reason: "hidden by a list filter"})
			reported[t.Name] = true
		}
	}
	changes, err := g.cat.Update(ctx, server, kept)
	var tooMany *catalog.TooManyError
	if errors.As(err, &tooMany) {
		return out, err
	} else if err != nil {
		g.log.Warn("some tools were not indexed", "server", server, "error", err)
	}
	out.Usable = 0
	for _, t := range g.cat.ServerTools(server) {
		if !reported[t.Name] {
			out.Usable++
		}
	}
	for _, c := range changes {
		if !g.recorded.add(server, c.Tool.Name, c.Tool.Hash, g.limits.MaxToolsPerServer) {
			continue // this definition was recorded before: a flip back
		}
		if c.Previous == "" {
			g.emit(ctx, extension.Event{Type: audit.ToolSeen, Server: server, Tool: c.Tool.Name, Fields: map[string]any{"tool_hash": c.Tool.Hash, "description": c.Tool.Def().Description}})
		} else {
			g.emit(ctx, extension.Event{Type: audit.ToolChanged, Server: server, Tool: c.Tool.Name, Fields: map[string]any{"previous_hash": c.Previous, "new_hash": c.Tool.Hash}})
		}
	}
	return out, nil
}

// relist re-indexes a server after notifications/tools/list_changed,
// through the server's coalescer: a flood of notifications costs a bounded
// number of listings. In hybrid mode clients are told after each listing.
func (g *Gateway) relist(name string) {
	if _, ok := g.ups.Get(name); !ok {
		return
	}
	g.listStateOf(name).relists.notify(g.ctx, func() {
		srv, ok := g.ups.Get(name)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(g.ctx, upstream.DefaultConnectTimeout)
		defer cancel()
		if err := g.index(ctx, srv, 0); err != nil && g.ctx.Err() == nil {
			g.log.Warn("re-listing tools after list_changed failed", "server", name, "error", err)
		}
		if g.pt != nil {
			for _, s := range g.servers {
				s.AddTool(&mcp.Tool{Name: passthrough.PlaceholderTool, InputSchema: map[string]any{"type": "object"}}, passthrough.PlaceholderToolHandler)
				s.RemoveTools(passthrough.PlaceholderTool)
			}
		}
	})
}

// hashMemory is how many definition hashes are remembered per tool.
const hashMemory = 8

// recordedHashes remembers, per server and tool, the definition hashes
// already recorded in the audit log, so a server flipping a definition
// back and forth writes each definition once.
type recordedHashes struct {
	mu sync.Mutex
	m  map[string]map[string][]string // server → tool → recent hashes
}

// add records hash for server's tool and reports whether it is new. The
// memory is bounded: hashMemory per tool, and tools no longer listed are
// forgotten once a server's entries pass twice maxTools.
func (r *recordedHashes) add(server, tool, hash string, maxTools int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string][]string{}
	}
	tools := r.m[server]
	if tools == nil {
		tools = map[string][]string{}
		r.m[server] = tools
	}
	hs := tools[tool]
	if slices.Contains(hs, hash) {
		return false
	}
	if len(hs) >= hashMemory {
		hs = hs[1:]
	}
	tools[tool] = append(hs, hash)
	if len(tools) > 2*max(maxTools, 1) {
		clear(tools) // a server renaming its tools endlessly: start over
		tools[tool] = []string{hash}
	}
	return true
}

// forget drops what was recorded for server (a load that failed).
func (r *recordedHashes) forget(server string) {
	r.mu.Lock()
	delete(r.m, server)
	r.mu.Unlock()
}

// loadMessage is load_mcp_server's answer: how many tools the model can
// use and why each other one cannot be used.
func loadMessage(server string, o ListOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Connected %q: %d of %d tool(s) can be used.", server, o.Usable, o.Listed)
	if o.Usable > 0 {
		b.WriteString(" Use search_tools to find them.")
	}
	if len(o.Held) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\n%d tool(s) cannot be used:", len(o.Held))
	const shown = 20
	for i, h := range o.Held {
		if i == shown {
			fmt.Fprintf(&b, "\n- and %d more (the operator's audit log lists them)", len(o.Held)-shown)
			break
		}
		name := h.Tool
		if name == "" {
			name = "(no name)"
		}
		fmt.Fprintf(&b, "\n- %s: %s (%s)", name, h.Reason, h.Rule)
	}
	return b.String()
}
