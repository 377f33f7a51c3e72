package search

import (
	"context"
	"math"
	"sort"
	"sync"
)

// BM25 parameters and field weights. The name is the strongest signal of
// what a tool does, so its terms count three times; parameter names and
// descriptions count once, like the description.
const (
	bm25K1     = 1.2
	bm25B      = 0.75
	nameWeight = 3.0
	// satCap is the saturation of one name occurrence in an average document.
	satCap = nameWeight * (bm25K1 + 1) / (nameWeight + bm25K1)
)

// Lexical is a BM25F-style keyword index over tool names, descriptions and
// parameters.
//
// Score scale: for each informative query term (one that occurs somewhere in
// the index) the term's BM25 saturation is divided by, and capped at, what
// one occurrence in the name of an average-length document earns; the score
// is the idf-weighted mean over those terms. It is therefore in [0, 1]:
// 1 means every informative query term is in the tool's name, a term found
// once in the description counts about 0.64 of its weight, and 0.3 (the
// default threshold) is roughly half the query's weight found in
// descriptions.
type Lexical struct {
	mu       sync.RWMutex
	docs     map[string]*lexDoc
	byServer map[string][]string
	postings map[string]map[string]float64
	totalLen float64
}

type lexDoc struct {
	tf  map[string]float64
	len float64
}

// NewLexical returns an empty lexical index.
func NewLexical() *Lexical {
	return &Lexical{
		docs:     map[string]*lexDoc{},
		byServer: map[string][]string{},
		postings: map[string]map[string]float64{},
	}
}

func (l *Lexical) Set(_ context.Context, server string, docs []Doc) error {
	prepared := make(map[string]*lexDoc, len(docs))
	for _, d := range docs {
		prepared[d.ID] = analyse(d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(server)
	ids := make([]string, 0, len(docs))
	for id, ld := range prepared {
		l.docs[id] = ld
		l.totalLen += ld.len
		for t, f := range ld.tf {
			p := l.postings[t]
			if p == nil {
				p = map[string]float64{}
				l.postings[t] = p
			}
			p[id] = f
		}
		ids = append(ids, id)
	}
	l.byServer[server] = ids
	return nil
}

func (l *Lexical) Remove(server string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(server)
}

func (l *Lexical) removeLocked(server string) {
	for _, id := range l.byServer[server] {
		ld := l.docs[id]
		if ld == nil {
			continue
		}
		for t := range ld.tf {
			p := l.postings[t]
			delete(p, id)
			if len(p) == 0 {
				delete(l.postings, t)
			}
		}
		l.totalLen -= ld.len
		delete(l.docs, id)
	}
	delete(l.byServer, server)
}

func analyse(d Doc) *lexDoc {
	ld := &lexDoc{tf: map[string]float64{}}
	add := func(text string, w float64) {
		for _, t := range Tokenize(text) {
			ld.tf[t] += w
			ld.len += w
		}
	}
	add(d.Name, nameWeight)
	add(d.Server, 1)
	add(d.Description, 1)
	for _, p := range d.Params {
		add(p.Name, 1)
		add(p.Description, 1)
	}
	return ld
}

func (l *Lexical) Search(_ context.Context, query string, limit int, minScore float64) (Result, error) {
	terms := uniq(Tokenize(query))
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := float64(len(l.docs))
	if n == 0 || len(terms) == 0 {
		return Result{}, nil
	}
	avg := l.totalLen / n
	scores := map[string]float64{}
	var norm float64
	for _, t := range terms {
		p := l.postings[t]
		if len(p) == 0 {
			continue
		}
		df := float64(len(p))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		norm += idf
		for id, tf := range p {
			dl := l.docs[id].len
			sat := tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avg))
			scores[id] += idf * math.Min(sat, satCap)
		}
	}
	if norm == 0 {
		return Result{}, nil
	}
	hits := make([]Hit, 0, len(scores))
	for id, s := range scores {
		if s /= norm * satCap; s >= minScore {
			hits = append(hits, Hit{ID: id, Score: s})
		}
	}
	SortHits(hits)
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	return Result{Hits: hits}, nil
}

// SortHits orders hits by descending score, then by ID for determinism.
func SortHits(hits []Hit) {
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
}

func uniq(ts []string) []string {
	seen := make(map[string]bool, len(ts))
	out := ts[:0:0]
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}
