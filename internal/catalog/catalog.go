// Package catalog is the registry of upstream tools: every tool of every
// connected server under its qualified name server__tool, kept in step with
// the search index.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/search"
)

// Sep joins a server name and a tool name into a qualified name.
const Sep = extension.Sep

// Qualify returns server__tool (extension.Qualify).
func Qualify(server, tool string) string { return extension.Qualify(server, tool) }

// Split splits a qualified name at its first "__" (extension.Split).
func Split(qualified string) (server, tool string, ok bool) { return extension.Split(qualified) }

// Tool is one upstream tool.
type Tool struct {
	Server    string
	Name      string
	Qualified string
	// Def is the upstream's definition, with the upstream's own name.
	Def *mcp.Tool
	// Hash is DefinitionHash(Def).
	Hash string
}

// Match is a tool found by a search.
type Match struct {
	*Tool
	Score float64
}

// Catalog holds the tools of every server. It is safe for concurrent use.
type Catalog struct {
	index search.Index

	// update serialises Update and RemoveServer, so the limits hold
	// across servers listed concurrently.
	update sync.Mutex
	limits Limits

	mu      sync.RWMutex
	servers map[string][]*Tool
	tools   map[string]*Tool
}

// New returns an empty catalog that keeps idx in step.
func New(idx search.Index) *Catalog {
	return &Catalog{index: idx, servers: map[string][]*Tool{}, tools: map[string]*Tool{}}
}

// SetLimits sets the limits Update enforces from now on.
func (c *Catalog) SetLimits(l Limits) {
	c.update.Lock()
	c.limits = l
	c.update.Unlock()
}

// Index returns the search index behind the catalog.
func (c *Catalog) Index() search.Index { return c.index }

// Change is how a SetServer changed one tool.
type Change struct {
	Tool *Tool
	// Previous is the hash the tool had before, or "" if it is new.
	Previous string
}

// SetServer replaces the tools of server with defs and re-indexes them.
// Definitions without a name, and duplicates, are skipped with an error
// listing them; the rest are kept.
func (c *Catalog) SetServer(ctx context.Context, server string, defs []*mcp.Tool) error {
	_, err := c.Update(ctx, server, defs)
	return err
}

// Update is SetServer that also reports the tools that are new or whose
// definition hash changed. A list over the limits (PerServer, Total) is
// refused as a whole with a *TooManyError, leaving the server's tools as
// they were; definitions over the size limits are skipped like nameless
// ones.
func (c *Catalog) Update(ctx context.Context, server string, defs []*mcp.Tool) ([]Change, error) {
	c.update.Lock()
	defer c.update.Unlock()
	lim := c.limits
	defs, rejected, err := Admit(server, defs, lim)
	if err != nil {
		return nil, err
	}
	if lim.Total > 0 {
		c.mu.RLock()
		total := len(c.tools) - len(c.servers[server]) + len(defs)
		c.mu.RUnlock()
		if total > lim.Total {
			return nil, &TooManyError{Server: server, Listed: len(defs), Key: KeyTotal, Limit: lim.Total, Total: total}
		}
	}
	var bad []string
	for _, r := range rejected {
		if r.Tool == "" {
			bad = append(bad, r.Reason)
		} else {
			bad = append(bad, fmt.Sprintf("tool %q (%s)", r.Tool, r.Reason))
		}
	}
	tools := make([]*Tool, 0, len(defs))
	docs := make([]search.Doc, 0, len(defs))
	for _, d := range defs {
		t := &Tool{Server: server, Name: d.Name, Qualified: Qualify(server, d.Name), Def: d, Hash: DefinitionHash(d)}
		tools = append(tools, t)
		docs = append(docs, DocOf(t))
	}
	if err := c.index.Set(ctx, server, docs); err != nil {
		return nil, fmt.Errorf("index %s: %w", server, err)
	}
	var changes []Change
	c.mu.Lock()
	prev := map[string]string{}
	for _, t := range c.servers[server] {
		prev[t.Qualified] = t.Hash
		delete(c.tools, t.Qualified)
	}
	c.servers[server] = tools
	for _, t := range tools {
		c.tools[t.Qualified] = t
		if h, ok := prev[t.Qualified]; !ok || h != t.Hash {
			changes = append(changes, Change{Tool: t, Previous: h})
		}
	}
	c.mu.Unlock()
	if len(bad) > 0 {
		return changes, fmt.Errorf("server %s listed %s; skipped", server, strings.Join(bad, ", "))
	}
	return changes, nil
}

// RemoveServer drops every tool of server.
func (c *Catalog) RemoveServer(server string) {
	c.update.Lock()
	defer c.update.Unlock()
	c.index.Remove(server)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.servers[server] {
		delete(c.tools, t.Qualified)
	}
	delete(c.servers, server)
}

// Lookup finds a tool by qualified name.
func (c *Catalog) Lookup(qualified string) (*Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.tools[qualified]
	return t, ok
}

// HasServer reports whether server has been registered (even with no tools).
func (c *Catalog) HasServer(server string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.servers[server]
	return ok
}

// ServerTools returns the tools of server, in the order it listed them.
func (c *Catalog) ServerTools(server string) []*Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.servers[server])
}

// All returns every tool sorted by qualified name.
func (c *Catalog) All() []*Tool {
	c.mu.RLock()
	out := make([]*Tool, 0, len(c.tools))
	for _, t := range c.tools {
		out = append(out, t)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Qualified < out[j].Qualified })
	return out
}

// Len is the number of tools.
func (c *Catalog) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.tools)
}

// Search ranks the catalogue against query and returns up to limit matches
// scoring at least minScore. Hits for tools removed since the index answered
// are dropped.
func (c *Catalog) Search(ctx context.Context, query string, limit int, minScore float64) ([]Match, search.Result, error) {
	res, err := c.index.Search(ctx, query, limit, minScore)
	if err != nil {
		return nil, res, err
	}
	out := make([]Match, 0, len(res.Hits))
	c.mu.RLock()
	for _, h := range res.Hits {
		if t, ok := c.tools[h.ID]; ok {
			out = append(out, Match{Tool: t, Score: h.Score})
		}
	}
	c.mu.RUnlock()
	return out, res, nil
}

// DocOf extracts the searchable text of a tool: name, description and the
// names and descriptions of its input parameters.
func DocOf(t *Tool) search.Doc {
	d := search.Doc{ID: t.Qualified, Server: t.Server, Name: t.Name, Description: t.Def.Description}
	if d.Description == "" {
		d.Description = t.Def.Title
	}
	d.Params = params(t.Def.InputSchema)
	return d
}

func params(schema any) []search.Param {
	var m map[string]any
	switch s := schema.(type) {
	case map[string]any:
		m = s
	case nil:
		return nil
	default:
		// Typed schemas (e.g. *jsonschema.Schema) are normalised through JSON.
		b, err := json.Marshal(s)
		if err != nil || json.Unmarshal(b, &m) != nil {
			return nil
		}
	}
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]search.Param, 0, len(names))
	for _, k := range names {
		p := search.Param{Name: k}
		if pm, ok := props[k].(map[string]any); ok {
			p.Description, _ = pm["description"].(string)
		}
		out = append(out, p)
	}
	return out
}

// DefinitionHash is the SHA-256 of a tool's definition in canonical JSON
// (extension.DefinitionHash, the one implementation).
func DefinitionHash(d *mcp.Tool) string { return extension.DefinitionHash(d) }
