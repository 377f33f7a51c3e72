// Package catalog is the registry of upstream tools: every tool of every
// connected server under its qualified name server__tool, kept in step with
// the search index.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// Tool is one upstream tool: what search and routing need, in memory; the
// full definition (schemas, annotations) is in the catalogue's store and
// read back by Def.
type Tool struct {
	Server    string
	Name      string
	Qualified string
	// Summary is the first line of the description, at most SummaryBytes,
	// for listings.
	Summary string
	// Hash is DefinitionHash(Def()).
	Hash string

	st  *store
	ref ref
}

// SummaryBytes bounds Tool.Summary.
const SummaryBytes = 160

// Def returns the upstream's definition, with the upstream's own name,
// decoded from the catalogue's store (recently used ones are kept
// decoded); callers must not modify it. It is never nil: if the store
// cannot be read (the state folder's disk failed, or the tool was replaced
// meanwhile) the error is logged and Def returns the name and summary with
// an empty object schema, a definition whose hash matches nothing, so
// pinning refuses it.
func (t *Tool) Def() *mcp.Tool {
	d, err := t.st.get(t.ref)
	if err != nil {
		t.st.log.Error("tool definition unavailable", "tool", t.Qualified, "error", err)
		return &mcp.Tool{Name: t.Name, Description: t.Summary, InputSchema: map[string]any{"type": "object"}}
	}
	return d
}

func summary(d *mcp.Tool) string {
	s := d.Description
	if s == "" {
		s = d.Title
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > SummaryBytes {
		s = strings.ToValidUTF8(s[:SummaryBytes], "") + "…"
	}
	return strings.Clone(s)
}

// Match is a tool found by a search.
type Match struct {
	*Tool
	Score float64
}

// Catalog holds the tools of every server. It is safe for concurrent use.
type Catalog struct {
	index search.Index
	st    *store

	// update serialises Update and RemoveServer, so the limits hold
	// across servers listed concurrently.
	update sync.Mutex
	limits Limits

	mu      sync.RWMutex
	servers map[string][]*Tool
	tools   map[string]*Tool
}

// New returns an empty catalog that keeps idx in step, with the tool
// definitions in memory (as JSON, each distinct one once).
func New(idx search.Index) *Catalog {
	st, _ := newStore("", nil)
	return &Catalog{index: idx, st: st, servers: map[string][]*Tool{}, tools: map[string]*Tool{}}
}

// Open is New with the tool definitions in a file in dir (created for this
// process, removed on Close), read back when a tool is returned or called.
func Open(idx search.Index, dir string, log *slog.Logger) (*Catalog, error) {
	st, err := newStore(dir, log)
	if err != nil {
		return nil, err
	}
	return &Catalog{index: idx, st: st, servers: map[string][]*Tool{}, tools: map[string]*Tool{}}, nil
}

// Close releases the definition store.
func (c *Catalog) Close() error { return c.st.close() }

// StoreSize reports the definition store: bytes held (live and garbage),
// garbage bytes, and distinct JSON blobs.
func (c *Catalog) StoreSize() (bytes, garbage int64, blobs int) { return c.st.size() }

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
	if lim.PerServer > 0 && len(defs) > lim.PerServer {
		return nil, &TooManyError{Server: server, Listed: len(defs), Key: KeyPerServer, Limit: lim.PerServer}
	}
	// Each input schema is encoded once, in parallel, and serves the size
	// limit, the store and the definition hash: encoding them was most of
	// a warm restart's CPU at 20,000 tools.
	schemas := make([]json.RawMessage, len(defs))
	search.ParallelFor(len(defs), func(i int) {
		if defs[i] != nil {
			schemas[i] = extension.CanonicalJSON(defs[i].InputSchema)
		}
	})
	admitted, rejected, err := admit(server, defs, lim, schemas)
	if err != nil {
		return nil, err
	}
	// admit keeps the order of defs: pair each admitted one with its schema.
	kept := schemas[:0]
	for i, j := 0, 0; i < len(defs) && j < len(admitted); i++ {
		if defs[i] == admitted[j] {
			kept = append(kept, schemas[i])
			j++
		}
	}
	defs, schemas = admitted, kept
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
	type prep struct {
		t   *Tool
		doc search.Doc
		err error
	}
	preps := make([]prep, len(defs))
	search.ParallelFor(len(defs), func(i int) {
		d, schema := defs[i], schemas[i]
		r, err := c.st.put(d, schema)
		if err != nil {
			preps[i].err = err
			return
		}
		t := &Tool{Server: server, Name: d.Name, Qualified: Qualify(server, d.Name), Summary: summary(d), Hash: extension.DefinitionHashOf(d, schema), st: c.st, ref: r}
		doc := DocFor(server, d)
		doc.ID = t.Qualified // one copy of the name, shared with the index
		preps[i] = prep{t: t, doc: doc}
	})
	tools := make([]*Tool, 0, len(defs))
	docs := make([]search.Doc, 0, len(defs))
	for i, p := range preps {
		if p.err != nil {
			bad = append(bad, fmt.Sprintf("tool %q (%v)", defs[i].Name, p.err))
			continue
		}
		tools = append(tools, p.t)
		docs = append(docs, p.doc)
	}
	if err := c.index.Set(ctx, server, docs); err != nil {
		for _, t := range tools {
			c.st.release(t.ref)
		}
		return nil, fmt.Errorf("index %s: %w", server, err)
	}
	var changes []Change
	c.mu.Lock()
	prev := map[string]string{}
	old := c.servers[server]
	for _, t := range old {
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
	for _, t := range old {
		c.st.release(t.ref)
	}
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
	old := c.servers[server]
	for _, t := range old {
		delete(c.tools, t.Qualified)
	}
	delete(c.servers, server)
	c.mu.Unlock()
	for _, t := range old {
		c.st.release(t.ref)
	}
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
func DocOf(t *Tool) search.Doc { return DocFor(t.Server, t.Def()) }

// DocFor is DocOf for server's definition def.
func DocFor(server string, def *mcp.Tool) search.Doc {
	d := search.Doc{ID: Qualify(server, def.Name), Server: server, Name: def.Name, Description: def.Description}
	if d.Description == "" {
		d.Description = def.Title
	}
	d.Params = params(def.InputSchema)
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

// Cosine estimates how alike two tools are by their vectors, ok false when
// the index cannot tell (keyword search, or a tool not embedded yet).
func (c *Catalog) Cosine(a, b string) (float64, bool) {
	if cmp, ok := c.index.(search.Comparer); ok {
		return cmp.Cosine(a, b)
	}
	return 0, false
}
