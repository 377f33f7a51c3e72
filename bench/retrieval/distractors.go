package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/search"
)

// distractorGen makes distractor tools from the real catalogue, each one
// from its index alone (a fixed seed per index), so a run can generate a
// server's tools when it lists them and drop them after, like an upstream's
// tools/list answer, instead of holding 100,000 definitions for the whole
// run.
//
// Two kinds, both as large as real tools:
//   - recombined (most): a name from two real name parts, a description
//     from a word-bigram chain over real descriptions, and an input schema
//     merging the properties of one to three real schemas;
//   - near-duplicates (-dup-share): a real tool's name, its description
//     with a few words dropped and its schema, on a distractor server: the
//     "ten send_email servers" of a real ecosystem.
//
// Every schema is decoded from its own JSON, as a client decodes an
// upstream's answer, so nothing is shared in memory that a real catalogue
// would not share.
type distractorGen struct {
	real      []toolRow
	schemas   [][]byte // JSON of real[i].InputSchema
	parts     []namePart
	starts    []int // indexes into real of tools with a description
	next      map[string][]string
	perServer int
	dupShare  float64
	// vecs are the real tools' embeddings, for synthetic distractor
	// vectors; nil when distractors are embedded by the model.
	vecs [][]float32
}

type namePart struct {
	word string
	tool int
}

type distractor struct {
	server string
	def    *mcp.Tool
	// srcs are the real tools it was made from; dup marks a near-duplicate.
	srcs []int
	dup  bool
}

func newDistractorGen(real []toolRow, perServer int, dupShare float64) *distractorGen {
	g := &distractorGen{real: real, next: map[string][]string{}, perServer: max(perServer, 1), dupShare: dupShare}
	for i, t := range real {
		b, _ := json.Marshal(t.InputSchema)
		g.schemas = append(g.schemas, b)
		for _, p := range strings.FieldsFunc(t.Name, func(r rune) bool { return r == '_' || r == '-' }) {
			g.parts = append(g.parts, namePart{strings.ToLower(p), i})
		}
		words := strings.Fields(t.Description)
		if len(words) == 0 {
			continue
		}
		g.starts = append(g.starts, i)
		for j := 0; j+1 < len(words); j++ {
			g.next[words[j]] = append(g.next[words[j]], words[j+1])
		}
	}
	return g
}

// server returns the name of the s-th distractor server.
func (g *distractorGen) server(s int) string {
	rng := rand.New(rand.NewPCG(7, uint64(s)))
	return fmt.Sprintf("synth-%s-%d", g.parts[rng.IntN(len(g.parts))].word, s)
}

func (g *distractorGen) make(i int) distractor {
	rng := rand.New(rand.NewPCG(42, uint64(i)))
	d := distractor{server: g.server(i / g.perServer)}
	if rng.Float64() < g.dupShare {
		src := rng.IntN(len(g.real))
		t := g.real[src]
		words := strings.Fields(t.Description)
		kept := words[:0:0]
		for _, w := range words {
			if rng.Float64() >= 0.15 {
				kept = append(kept, w)
			}
		}
		d.def = &mcp.Tool{Name: t.Name, Description: strings.Join(kept, " "), InputSchema: decodeSchema(g.schemas[src])}
		d.srcs, d.dup = []int{src}, true
		return d
	}
	p1, p2 := g.parts[rng.IntN(len(g.parts))], g.parts[rng.IntN(len(g.parts))]
	name := fmt.Sprintf("%s_%s_%d", p1.word, p2.word, i%g.perServer)
	base := g.starts[rng.IntN(len(g.starts))]
	w := strings.Fields(g.real[base].Description)[0]
	desc := []string{w}
	for len(desc) < 8+rng.IntN(30) {
		cands := g.next[w]
		if len(cands) == 0 {
			break
		}
		w = cands[rng.IntN(len(cands))]
		desc = append(desc, w)
	}
	schema := decodeSchema(g.schemas[base])
	for range rng.IntN(3) {
		mergeSchema(schema, decodeSchema(g.schemas[rng.IntN(len(g.schemas))]))
	}
	d.def = &mcp.Tool{Name: name, Description: strings.Join(desc, " "), InputSchema: schema}
	d.srcs = []int{p1.tool, p2.tool, base}
	return d
}

func decodeSchema(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		m = map[string]any{"type": "object"}
	}
	return m
}

// mergeSchema adds src's properties (and their required flags) that dst
// lacks.
func mergeSchema(dst, src map[string]any) {
	sp, _ := src["properties"].(map[string]any)
	if len(sp) == 0 {
		return
	}
	dp, _ := dst["properties"].(map[string]any)
	if dp == nil {
		dp = map[string]any{}
		dst["properties"] = dp
	}
	req, _ := dst["required"].([]any)
	sreq, _ := src["required"].([]any)
	for k, v := range sp {
		if _, ok := dp[k]; ok {
			continue
		}
		dp[k] = v
		for _, r := range sreq {
			if r == k {
				req = append(req, k)
			}
		}
	}
	if len(req) > 0 {
		dst["required"] = req
	}
}

// eachServer calls f with the tools of each distractor server in turn.
func (g *distractorGen) eachServer(n int, f func(server string, defs []*mcp.Tool) error) error {
	for lo := 0; lo < n; lo += g.perServer {
		hi := min(lo+g.perServer, n)
		defs := make([]*mcp.Tool, 0, hi-lo)
		server := ""
		seen := map[string]bool{}
		for i := lo; i < hi; i++ {
			d := g.make(i)
			server = d.server
			// Two near-duplicates of one tool on one server: keep the first.
			if !seen[d.def.Name] {
				seen[d.def.Name] = true
				defs = append(defs, d.def)
			}
		}
		if err := f(server, defs); err != nil {
			return err
		}
	}
	return nil
}

// docText is the text the dense index embeds for a tool.
func docText(server string, def *mcp.Tool) string {
	return catalog.DocFor(server, def).Text()
}

// seedSyntheticVectors writes a vector for every distractor into the
// embedding cache in stateDir, so the index finds them cached instead of
// running the model over 100,000 texts (hours on two cores). The real
// tools are embedded by the model (and cached too). A distractor's vector
// is made from the real vectors of the tools it was made from plus noise:
// a near-duplicate lands at cosine 0.58–0.91 from its original, a recombined
// tool between its sources, so both compete with the real tools the way
// their text would.
func (g *distractorGen) seedSyntheticVectors(ctx context.Context, m embed.Embedder, stateDir string, n int) error {
	cache, err := search.OpenVecCache(filepath.Join(stateDir, "embeddings"), m.ModelID(), m.Dim())
	if err != nil {
		return err
	}
	defer cache.Close()
	texts := make([]string, len(g.real))
	for i, t := range g.real {
		texts[i] = docText(t.Server, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	g.vecs = make([][]float32, len(texts))
	var missing []int
	for i, t := range texts {
		if v, ok := cache.Get(search.CacheKey(m.ModelID(), t)); ok {
			g.vecs[i] = v
		} else {
			missing = append(missing, i)
		}
	}
	for lo := 0; lo < len(missing); lo += 32 {
		batch := missing[lo:min(lo+32, len(missing))]
		in := make([]string, len(batch))
		for j, i := range batch {
			in[j] = texts[i]
		}
		vs, err := m.Embed(ctx, in)
		if err != nil {
			return err
		}
		keys := make([][32]byte, len(batch))
		for j, i := range batch {
			g.vecs[i] = vs[j]
			keys[j] = search.CacheKey(m.ModelID(), texts[i])
		}
		if err := cache.Put(keys, vs); err != nil {
			return err
		}
	}
	dim := m.Dim()
	var keys [][32]byte
	var vecs [][]float32
	for i := range n {
		d := g.make(i)
		k := search.CacheKey(m.ModelID(), docText(d.server, d.def))
		if cache.Has(k) {
			continue
		}
		rng := rand.New(rand.NewPCG(99, uint64(i)))
		v := make([]float32, dim)
		for _, s := range d.srcs {
			for j, x := range g.vecs[s] {
				v[j] += x
			}
		}
		normalise(v)
		noise := 0.9 // recombined: cosine ≈ 0.55–0.75 to the mean of its sources
		if d.dup {
			// Near-duplicate: cosine 0.58–0.91 to its original, the
			// range real cross-server alternatives span (bench/README.md).
			noise = 0.45 + 0.95*rng.Float64()
		}
		sigma := noise / math.Sqrt(float64(dim))
		for j := range v {
			v[j] += float32(rng.NormFloat64() * sigma)
		}
		normalise(v)
		keys = append(keys, k)
		vecs = append(vecs, v)
		if len(keys) == 4096 {
			if err := cache.Put(keys, vecs); err != nil {
				return err
			}
			keys, vecs = keys[:0], vecs[:0]
		}
	}
	return cache.Put(keys, vecs)
}

func normalise(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for j := range v {
		v[j] *= inv
	}
}
