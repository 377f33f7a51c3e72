package search

import (
	"context"
	"sync"
)

// DefaultDenseWeight is the share of the dense (semantic) score in a hybrid
// score; the rest is the lexical score. Tuned on the retrieval benchmark
// (bench/retrieval); see bench/README.md.
const DefaultDenseWeight = 0.75

// Hybrid combines a Dense and a Lexical index. Semantic similarity finds
// paraphrases; the lexical part rewards exact names and identifiers, which
// matter in tool search.
//
// Score scale: w·cosine + (1−w)·lexical, with the cosine clamped to [0, 1]
// and the lexical score on Lexical's [0, 1] scale (1 = the best keyword
// match for the query, when it is at least as strong as the query's rarest
// known word in a tool's name). With the default w = 0.75, a tool reaches
// the default threshold 0.3 with a cosine of 0.4 and no keyword in common,
// or a cosine of 0.25 plus a fair keyword match (0.45); unrelated tools sit
// near cosine 0.1 with MiniLM. A tool not
// embedded yet is scored by its lexical score alone, so searches answer
// during indexing (Result.Partial says so).
type Hybrid struct {
	Lex    *Lexical
	Dense  *Dense
	Weight float64

	// l2d maps a lexical slot to the dense slot of the same document, so
	// fusing thousands of keyword hits costs no map lookups. An entry may
	// be stale while a Set is under way; Search checks the IDs match.
	mu  sync.RWMutex
	l2d []int32
}

// NewHybrid returns a hybrid index over a fresh lexical index and dense.
func NewHybrid(dense *Dense) *Hybrid {
	return &Hybrid{Lex: NewLexical(), Dense: dense, Weight: DefaultDenseWeight}
}

func (h *Hybrid) Set(ctx context.Context, server string, docs []Doc) error {
	ids, lslots := h.Lex.set(server, docs)
	if err := h.Dense.Set(ctx, server, docs); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Dense.mu.RLock()
	defer h.Dense.mu.RUnlock()
	for i, ls := range lslots {
		for int(ls) >= len(h.l2d) {
			h.l2d = append(h.l2d, -1)
		}
		ds, ok := h.Dense.slot[ids[i]]
		if !ok {
			ds = -1
		}
		h.l2d[ls] = ds
	}
	return nil
}

func (h *Hybrid) Remove(server string) {
	h.Lex.Remove(server)
	h.Dense.Remove(server)
}

func (h *Hybrid) Search(ctx context.Context, query string, limit int, minScore float64) (Result, error) {
	q, err := h.Dense.queryVec(ctx, query)
	if err != nil {
		return Result{}, err
	}
	lex := h.Lex.slotScores(query)
	w := float32(h.Weight)
	d := h.Dense
	var res Result
	h.mu.RLock()
	defer h.mu.RUnlock()
	d.mu.RLock()
	cos := getF32(len(d.ids), false)
	defer putF32(cos)
	d.cosinesLocked(q, cos)
	score := getF32(len(cos), false)
	defer putF32(score)
	for s, c := range cos {
		if d.state[s] == slotReady {
			score[s] = w * float32(clamp01(c))
		}
	}
	hits := make([]Hit, 0, 64)
	for _, l := range lex {
		s := int32(-1)
		if int(l.slot) < len(h.l2d) {
			s = h.l2d[l.slot]
		}
		// The slot map is checked, not trusted: a Set may be under way.
		if s < 0 || int(s) >= len(d.ids) || d.ids[s] != l.id {
			var ok bool
			if s, ok = d.slot[l.id]; !ok {
				s = -1
			}
		}
		if s >= 0 && d.state[s] == slotReady {
			score[s] += (1 - w) * float32(l.score)
		} else if l.score >= minScore {
			// No vector yet (or none possible): keyword evidence alone.
			hits = append(hits, Hit{ID: l.id, Score: l.score})
		}
	}
	d.rescoreLocked(q, cos, score, w)
	for s, v := range score {
		if d.state[s] == slotReady && float64(v) >= minScore {
			hits = append(hits, Hit{ID: d.ids[s], Score: float64(v)})
		}
	}
	d.noteLocked(&res)
	d.mu.RUnlock()
	res.Hits = TopHits(hits, limit)
	return res, nil
}

// Close stops the dense indexer and closes its cache, and writes the
// lexical index's cache file (Lexical.Persist).
func (h *Hybrid) Close() error {
	err := h.Dense.Close()
	if h.Dense.cache != nil {
		if cerr := h.Dense.cache.Close(); err == nil {
			err = cerr
		}
	}
	if lerr := h.Lex.Close(); err == nil {
		err = lerr
	}
	return err
}

// Pending is the number of documents not embedded yet.
func (h *Hybrid) Pending() int { return h.Dense.Pending() }

// Wait blocks until every document has its vector or ctx ends.
func (h *Hybrid) Wait(ctx context.Context) error { return h.Dense.Wait(ctx) }

// Cosine estimates how alike two documents' vectors are (Dense.Cosine).
func (h *Hybrid) Cosine(a, b string) (float64, bool) { return h.Dense.Cosine(a, b) }
