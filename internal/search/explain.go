package search

import "context"

// Parts is a document's score from each part of an index, on that part's
// own [0, 1] scale (see Lexical and Dense). Dense is absent for a lexical
// index and for a document not embedded yet.
type Parts struct {
	Lexical float64  `json:"lexical"`
	Dense   *float64 `json:"dense,omitempty"`
}

// Explainer is an index that can break a query's scores down by part, so
// an operator can see why a tool ranks where it does (the console's search
// playground). Only documents with a non-zero part are returned.
type Explainer interface {
	Explain(ctx context.Context, query string) (map[string]Parts, error)
}

func (l *Lexical) Explain(_ context.Context, query string) (map[string]Parts, error) {
	out := map[string]Parts{}
	for _, h := range l.scores(query) {
		out[h.ID] = Parts{Lexical: h.Score}
	}
	return out, nil
}

func (d *Dense) Explain(ctx context.Context, query string) (map[string]Parts, error) {
	return d.explain(ctx, query, map[string]Parts{})
}

func (d *Dense) explain(ctx context.Context, query string, out map[string]Parts) (map[string]Parts, error) {
	q, err := d.queryVec(ctx, query)
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	// The first pass is int8; searches rescore their best candidates
	// exactly, so the parts shown are exact too wherever they matter: for
	// every document the first pass or the keywords find. This reads
	// vectors back from the cache, which is fine for an operator's
	// playground and is not the search path.
	cos := make([]float32, len(d.ids))
	d.cosinesLocked(q, cos)
	buf := make([]float32, d.dim)
	for s, c := range cos {
		if d.state[s] != slotReady {
			continue
		}
		_, lexical := out[d.ids[s]]
		if c <= 0 && !lexical {
			continue
		}
		if e, ok := d.exactCosLocked(int32(s), q, buf); ok {
			c = e
		}
		v := clamp01(c)
		p, lexical := out[d.ids[s]]
		if v > 0 || lexical {
			p.Dense = &v
			out[d.ids[s]] = p
		}
	}
	return out, nil
}

func (h *Hybrid) Explain(ctx context.Context, query string) (map[string]Parts, error) {
	out, _ := h.Lex.Explain(ctx, query)
	return h.Dense.explain(ctx, query, out)
}
