package search

import (
	"context"
)

// DefaultDenseWeight is the share of the dense (semantic) score in a hybrid
// score; the rest is the lexical score. Tuned on the retrieval benchmark
// (bench/retrieval); see bench/README.md.
const DefaultDenseWeight = 0.75

// Hybrid combines a Dense and a Lexical index: the score of a tool is
// w·cosine + (1−w)·lexical, both in [0, 1], so the similarity threshold
// keeps one meaning across modes. Semantic similarity finds paraphrases;
// the lexical part rewards exact names and identifiers, which matter in
// tool search. A tool not embedded yet is scored by its lexical score alone,
// so searches answer during indexing.
type Hybrid struct {
	Lex    *Lexical
	Dense  *Dense
	Weight float64
}

// NewHybrid returns a hybrid index over a fresh lexical index and dense.
func NewHybrid(dense *Dense) *Hybrid {
	return &Hybrid{Lex: NewLexical(), Dense: dense, Weight: DefaultDenseWeight}
}

func (h *Hybrid) Set(ctx context.Context, server string, docs []Doc) error {
	if err := h.Lex.Set(ctx, server, docs); err != nil {
		return err
	}
	return h.Dense.Set(ctx, server, docs)
}

func (h *Hybrid) Remove(server string) {
	h.Lex.Remove(server)
	h.Dense.Remove(server)
}

func (h *Hybrid) Search(ctx context.Context, query string, limit int, minScore float64) (Result, error) {
	dense, res, err := h.Dense.scores(ctx, query, 0)
	if err != nil {
		return Result{}, err
	}
	lex, err := h.Lex.Search(ctx, query, 0, 0)
	if err != nil {
		return Result{}, err
	}
	w := h.Weight
	lexScore := make(map[string]float64, len(lex.Hits))
	for _, l := range lex.Hits {
		lexScore[l.ID] = l.Score
	}
	hits := make([]Hit, 0, len(dense))
	for _, d := range dense {
		s := w*d.Score + (1-w)*lexScore[d.ID]
		delete(lexScore, d.ID)
		if s >= minScore {
			hits = append(hits, Hit{ID: d.ID, Score: s})
		}
	}
	// What is left has no vector yet: keyword evidence alone.
	if res.Partial {
		for id, s := range lexScore {
			if s >= minScore {
				hits = append(hits, Hit{ID: id, Score: s})
			}
		}
	}
	SortHits(hits)
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	res.Hits = hits
	return res, nil
}

// Close stops the dense indexer and closes its cache.
func (h *Hybrid) Close() error {
	err := h.Dense.Close()
	if h.Dense.cache != nil {
		if cerr := h.Dense.cache.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Pending is the number of documents not embedded yet.
func (h *Hybrid) Pending() int { return h.Dense.Pending() }

// Wait blocks until every document has its vector or ctx ends.
func (h *Hybrid) Wait(ctx context.Context) error { return h.Dense.Wait(ctx) }
