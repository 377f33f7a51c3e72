package extmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
)

// callParams are the params of tools/call as processors see them.
type callParams struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// WrapCall presents the call to the processors of the request phase
// (rewrite), then the result to those of the response phase.
func (g *Guardrails) WrapCall(next extension.CallHandler) extension.CallHandler {
	if f := g.responseFilter(); f != nil {
		next = extension.After(f)(next)
	}
	rewrite := g.callFilter()
	if rewrite == nil {
		return next
	}
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		req, err := rewrite(ctx, req)
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// callFilter presents a call_tool as the tools/call of the upstream tool to
// every processor with tools/call in the request phase. A mutation replaces
// the arguments for the processors after it and for the upstream: the
// request it returns is the one to pass on.
func (g *Guardrails) callFilter() func(context.Context, *extension.CallRequest) (*extension.CallRequest, error) {
	procs := g.procsFor(methodCall, PhaseRequest)
	if len(procs) == 0 {
		return nil
	}
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallRequest, error) {
		args, err := req.Arguments()
		if err != nil {
			return nil, err
		}
		params, err := json.Marshal(callParams{Name: req.Tool, Arguments: args})
		if err != nil {
			return nil, fmt.Errorf("encode tools/call params: %w", err)
		}
		c := newCall(methodCall, req.ServerName, req.Principal, req.Session, req.Tool)
		for _, p := range procs {
			mut, err := g.request(ctx, p, c, params)
			if err != nil {
				return nil, err
			}
			if mut == nil {
				continue
			}
			newArgs, err := decodeCallParams(mut, req.Tool)
			if err != nil {
				if err := g.failed(ctx, p, c, "request", err); err != nil {
					return nil, err
				}
				continue
			}
			req, params = req.WithArguments(newArgs), mut
		}
		return req, nil
	}
}

// decodeCallParams reads mutated tools/call params. The name may be left
// out but not changed: toolgate cannot reroute a call the discovery gate
// admitted. Missing arguments mean none.
func decodeCallParams(b []byte, tool string) (map[string]any, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("mutated tools/call params are not a JSON object")
	}
	var w struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(t, &w); err != nil {
		return nil, fmt.Errorf("mutated tools/call params: %w", err)
	}
	if w.Name != nil && *w.Name != tool {
		return nil, fmt.Errorf("mutated tools/call params rename the tool %q to %q, which toolgate does not do", tool, *w.Name)
	}
	a := bytes.TrimSpace(w.Arguments)
	if len(a) == 0 || string(a) == "null" {
		return map[string]any{}, nil
	}
	if a[0] != '{' {
		return nil, fmt.Errorf("mutated tools/call arguments are not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(a))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("mutated tools/call arguments: %w", err)
	}
	return args, nil
}

// responseFilter presents an upstream tool result as the result of
// tools/call to every processor with tools/call in the response phase. A
// mutation replaces the result. Results with isError are results and are
// presented too; only protocol errors skip this phase, and those never reach
// the response filters.
func (g *Guardrails) responseFilter() func(context.Context, *extension.CallRequest, *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	procs := g.procsFor(methodCall, PhaseResponse)
	if len(procs) == 0 {
		return nil
	}
	return func(ctx context.Context, req *extension.CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encode tools/call result: %w", err)
		}
		c := newCall(methodCall, req.ServerName, req.Principal, req.Session, req.Tool)
		for _, p := range procs {
			mut, err := g.response(ctx, p, c, raw)
			if err != nil {
				return nil, err
			}
			if mut == nil {
				continue
			}
			r, err := decodeResult(mut)
			if err != nil {
				if err := g.failed(ctx, p, c, "response", err); err != nil {
					return nil, err
				}
				continue
			}
			res, raw = r, mut
		}
		return res, nil
	}
}

func decodeResult(b []byte) (*mcp.CallToolResult, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("mutated tools/call result is not a JSON object")
	}
	var r mcp.CallToolResult
	if err := json.Unmarshal(t, &r); err != nil {
		return nil, fmt.Errorf("mutated tools/call result: %w", err)
	}
	if r.Content == nil {
		r.Content = []mcp.Content{}
	}
	return &r, nil
}

// searchFilter presents what search_tools or tools/list would show as tools/list traffic,
// once per upstream server (as a proxy fans tools/list out): processors with
// tools/list in the request phase see a tools/list request for each server
// whose tools are about to be shown, and those with it in the response phase
// see a tools/list result listing that server's tools with their own names.
// A mutation that leaves a tool out drops it (and may rewrite its
// description or input schema); a denial refuses the search.
//
// Only the tools that would be shown are presented: the top top_k of the
// ranking. When processors drop some, the next-ranked tools are presented
// in their place until top_k are accepted or the ranking runs out, so a
// tool no processor has seen is never shown.
func (g *Guardrails) searchFilter() func(context.Context, *extension.VisibilityRequest, []extension.SearchResult) ([]extension.SearchResult, error) {
	reqProcs := g.procsFor(methodList, PhaseRequest)
	resProcs := g.procsFor(methodList, PhaseResponse)
	if len(reqProcs) == 0 && len(resProcs) == 0 {
		return nil
	}
	return func(ctx context.Context, sreq *extension.VisibilityRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
		want := sreq.Limit
		if want <= 0 || want > len(results) {
			want = len(results)
		}
		accepted := make([]extension.SearchResult, 0, want)
		listed := map[string]bool{} // servers whose tools/list request was allowed
		for next := 0; len(accepted) < want && next < len(results); {
			n := min(want-len(accepted), len(results)-next)
			batch := results[next : next+n]
			next += n
			kept, err := g.checkListing(ctx, sreq, reqProcs, resProcs, batch, listed)
			if err != nil {
				return nil, err
			}
			accepted = append(accepted, kept...)
		}
		return accepted, nil
	}
}

// checkListing runs one batch of ranked results past the processors, one
// server at a time and the servers concurrently. It returns the survivors in
// rank order, or the denial of the best-ranked server that was refused.
func (g *Guardrails) checkListing(ctx context.Context, sreq *extension.VisibilityRequest, reqProcs, resProcs []*processor, batch []extension.SearchResult, listed map[string]bool) ([]extension.SearchResult, error) {
	type group struct {
		server  string
		results []extension.SearchResult
		kept    []extension.SearchResult
		err     error
	}
	var groups []*group
	byServer := map[string]*group{}
	for _, r := range batch {
		gr := byServer[r.Server]
		if gr == nil {
			gr = &group{server: r.Server}
			byServer[r.Server] = gr
			groups = append(groups, gr)
		}
		gr.results = append(gr.results, r)
	}
	run := func(gr *group, needRequest bool) {
		gr.kept, gr.err = g.checkServerListing(ctx, newCall(methodList, gr.server, sreq.Principal, sreq.Session, ""), reqProcs, resProcs, needRequest, gr.results)
	}
	if len(groups) == 1 {
		run(groups[0], !listed[groups[0].server])
	} else {
		var wg sync.WaitGroup
		for _, gr := range groups {
			need := !listed[gr.server]
			wg.Go(func() { run(gr, need) })
		}
		wg.Wait()
	}
	kept := map[string]extension.SearchResult{}
	for _, gr := range groups {
		if gr.err != nil {
			return nil, gr.err
		}
		listed[gr.server] = true
		for _, r := range gr.kept {
			kept[r.Name] = r
		}
	}
	out := make([]extension.SearchResult, 0, len(kept))
	for _, r := range batch {
		if k, ok := kept[r.Name]; ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// listedTool is a tool in a presented tools/list result. Description and
// InputSchema are raw so that a mutation's edits can be told from absence.
type listedTool struct {
	Name        string          `json:"name"`
	Description json.RawMessage `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// checkServerListing presents one server's tools.
func (g *Guardrails) checkServerListing(ctx context.Context, c call, reqProcs, resProcs []*processor, needRequest bool, results []extension.SearchResult) ([]extension.SearchResult, error) {
	if needRequest {
		for _, p := range reqProcs {
			// tools/list params carry only a cursor, which toolgate does not
			// page with, so a mutation has nothing to change and is ignored.
			if _, err := g.request(ctx, p, c, []byte("{}")); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range resProcs {
		raw, err := listing(results)
		if err != nil {
			return nil, err
		}
		mut, err := g.response(ctx, p, c, raw)
		if err != nil {
			return nil, err
		}
		if mut == nil {
			continue
		}
		kept, err := applyListing(mut, results)
		if err != nil {
			if err := g.failed(ctx, p, c, "response", err); err != nil {
				return nil, err
			}
			continue
		}
		results = kept
	}
	return results, nil
}

// listing is the tools/list result of one server's results, with the
// upstream's own tool names.
func listing(results []extension.SearchResult) ([]byte, error) {
	tools := make([]*mcp.Tool, len(results))
	for i, r := range results {
		var t mcp.Tool
		if r.Def != nil {
			t = *r.Def
		}
		t.Name, t.Description, t.InputSchema = r.Tool, r.Description, r.InputSchema
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
		tools[i] = &t
	}
	return json.Marshal(map[string]any{"tools": tools})
}

// applyListing keeps the results a mutated tools/list result still lists,
// with its description and input schema where it gives them. Tools it adds
// or renames are ignored: toolgate shows only indexed tools.
func applyListing(b []byte, results []extension.SearchResult) ([]extension.SearchResult, error) {
	var w struct {
		Tools json.RawMessage `json:"tools"`
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("mutated tools/list result is not a JSON object")
	}
	if err := json.Unmarshal(t, &w); err != nil {
		return nil, fmt.Errorf("mutated tools/list result: %w", err)
	}
	if len(w.Tools) == 0 {
		return nil, fmt.Errorf("mutated tools/list result has no \"tools\" array")
	}
	// "tools": null drops them all, like [].
	var tools []listedTool
	if err := json.Unmarshal(w.Tools, &tools); err != nil {
		return nil, fmt.Errorf("mutated tools/list result: tools: %w", err)
	}
	byName := make(map[string]listedTool, len(tools))
	for _, lt := range tools {
		byName[lt.Name] = lt
	}
	out := results[:0:0]
	for _, r := range results {
		lt, ok := byName[r.Tool]
		if !ok {
			continue
		}
		if d := bytes.TrimSpace(lt.Description); len(d) > 0 && string(d) != "null" {
			var s string
			if err := json.Unmarshal(d, &s); err != nil {
				return nil, fmt.Errorf("mutated tools/list result: tool %q: description is not a string", lt.Name)
			}
			r.Description = s
		}
		if s := bytes.TrimSpace(lt.InputSchema); len(s) > 0 && string(s) != "null" {
			var schema map[string]any
			if err := json.Unmarshal(s, &schema); err != nil {
				return nil, fmt.Errorf("mutated tools/list result: tool %q: inputSchema is not an object", lt.Name)
			}
			r.InputSchema = schema
		}
		out = append(out, r)
	}
	return out, nil
}

// FilterVisible presents the tools about to be shown as tools/list
// traffic when a processor has tools/list (see searchFilter).
func (g *Guardrails) FilterVisible(ctx context.Context, req *extension.VisibilityRequest, results []extension.SearchResult) ([]extension.SearchResult, error) {
	if f := g.searchFilter(); f != nil {
		return f(ctx, req, results)
	}
	return results, nil
}
