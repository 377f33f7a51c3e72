package search

import (
	"context"
	"math"
	"strings"
	"sync"
)

// BM25F parameters and field weights. The name is the strongest signal of
// what a tool does, so its terms count three times; the server name and the
// description once; parameter names and descriptions half, since parameter
// boilerplate (ids, paths, paging) is shared by many tools. Measured on the
// retrieval benchmark (bench/README.md).
const (
	bm25K1      = 1.2
	bm25B       = 0.75
	nameWeight  = 3.0
	paramWeight = 0.5
	// satCap is the BM25 saturation of one occurrence in the name of an
	// average-length document: the reference for a "full" match of a term.
	satCap = nameWeight * (bm25K1 + 1) / (nameWeight + bm25K1*1)
)

// Lexical is a BM25F keyword index over tool names, server names,
// descriptions and parameters. Documents live in slots with flat posting
// lists, so a search over tens of thousands of tools touches arrays, not
// maps.
//
// Ranking is plain (uncapped) BM25F. Score scale, in [0, 1]: a tool's BM25
// score divided by the larger of (a) the best BM25 score any tool reaches
// for this query and (b) the score of one occurrence of the query's most
// informative known term in the name of an average tool. So 1 is the best
// keyword match for the query when that match is at least as strong as
// "the query's rarest word is in the tool's name"; weaker best matches (only
// common words, or words found in descriptions only) score below 1. A query
// of words the index has never seen matches nothing.
type Lexical struct {
	mu       sync.RWMutex
	ids      []string // slot → ID; "" for a free slot
	lens     []float32
	free     []int32
	byServer map[string][]int32
	postings map[string][]posting
	totalLen float64
	live     int
	// hashes is each server's docsHash, for the cache file; cache is nil
	// without Persist.
	hashes map[string][32]byte
	cache  *lexCache
}

type posting struct {
	doc int32
	tf  float32
}

// NewLexical returns an empty lexical index.
func NewLexical() *Lexical {
	return &Lexical{byServer: map[string][]int32{}, postings: map[string][]posting{}, hashes: map[string][32]byte{}}
}

// lexDoc is an analysed document: its distinct terms with their weighted
// frequencies (tfs[i] for terms[i]) and its weighted length.
type lexDoc struct {
	id    string
	terms []string
	tfs   []float32
	len   float64
}

func analyse(d Doc) lexDoc {
	ld := lexDoc{id: d.ID}
	tf := map[string]float64{}
	add := func(text string, w float64) {
		for _, t := range Tokenize(text) {
			tf[t] += w
			ld.len += w
		}
	}
	add(d.Name, nameWeight)
	add(d.Server, 1)
	add(d.Description, 1)
	for _, p := range d.Params {
		add(p.Name, paramWeight)
		add(p.Description, paramWeight)
	}
	ld.terms = make([]string, 0, len(tf))
	ld.tfs = make([]float32, 0, len(tf))
	for t, f := range tf {
		ld.terms = append(ld.terms, t)
		ld.tfs = append(ld.tfs, float32(f))
	}
	return ld
}

func (l *Lexical) Set(_ context.Context, server string, docs []Doc) error {
	l.set(server, docs)
	return nil
}

// set is Set returning each indexed document's ID and slot.
func (l *Lexical) set(server string, docs []Doc) ([]string, []int32) {
	uniqDocs := make([]Doc, 0, len(docs))
	seen := make(map[string]bool, len(docs))
	for _, d := range docs {
		if !seen[d.ID] {
			seen[d.ID] = true
			uniqDocs = append(uniqDocs, d)
		}
	}
	var hash [32]byte
	var prepared []lexDoc
	if l.cache != nil {
		hash = docsHash(uniqDocs)
		prepared, _ = l.cache.take(server, uniqDocs, hash)
	}
	if prepared == nil {
		prepared = make([]lexDoc, len(uniqDocs))
		ParallelFor(len(uniqDocs), func(i int) { prepared[i] = analyse(uniqDocs[i]) })
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(server)
	slots := make([]int32, 0, len(prepared))
	for _, ld := range prepared {
		var s int32
		if n := len(l.free); n > 0 {
			s = l.free[n-1]
			l.free = l.free[:n-1]
		} else {
			s = int32(len(l.ids))
			l.ids = append(l.ids, "")
			l.lens = append(l.lens, 0)
		}
		l.ids[s] = ld.id
		l.lens[s] = float32(ld.len)
		for i, t := range ld.terms {
			p, ok := l.postings[t]
			if !ok {
				t = strings.Clone(t) // a term may be part of the tool's text
			}
			l.postings[t] = append(p, posting{doc: s, tf: ld.tfs[i]})
		}
		l.totalLen += ld.len
		l.live++
		slots = append(slots, s)
	}
	l.byServer[server] = slots
	if l.cache != nil {
		l.hashes[server] = hash
	}
	ids := make([]string, len(prepared))
	for i, ld := range prepared {
		ids[i] = ld.id
	}
	return ids, slots
}

func (l *Lexical) Remove(server string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(server)
}

func (l *Lexical) removeLocked(server string) {
	slots, ok := l.byServer[server]
	if !ok {
		return
	}
	delete(l.byServer, server)
	delete(l.hashes, server)
	if len(slots) == 0 {
		return
	}
	gone := make([]bool, len(l.ids))
	for _, s := range slots {
		gone[s] = true
		l.totalLen -= float64(l.lens[s])
		l.live--
		l.ids[s], l.lens[s] = "", 0
		l.free = append(l.free, s)
	}
	// One pass over the posting lists (about 30 per tool) is cheaper in
	// memory than remembering each tool's terms, and takes a few
	// milliseconds at 20,000 tools.
	for t, p := range l.postings {
		kept := p[:0]
		for _, x := range p {
			if !gone[x.doc] {
				kept = append(kept, x)
			}
		}
		if len(kept) == 0 {
			delete(l.postings, t)
		} else {
			l.postings[t] = kept
		}
	}
	if l.live == 0 {
		l.totalLen = 0
	}
}

// scores returns every document matching a query term with its score on
// the scale described at Lexical, unsorted.
func (l *Lexical) scores(query string) []Hit {
	lh := l.slotScores(query)
	hits := make([]Hit, len(lh))
	for i, h := range lh {
		hits[i] = Hit{ID: h.id, Score: h.score}
	}
	return hits
}

// lexHit is a scored document with its slot.
type lexHit struct {
	slot  int32
	id    string
	score float64
}

// slotScores is scores with each document's slot.
func (l *Lexical) slotScores(query string) []lexHit {
	terms := uniq(Tokenize(query))
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.live == 0 || len(terms) == 0 {
		return nil
	}
	n := float64(l.live)
	avg := float32(l.totalLen / n)
	// acc comes zeroed from the pool and goes back zeroed: only the
	// touched entries are cleared, not the whole catalogue's.
	acc := getF32(len(l.ids), true)
	touched := make([]int32, 0, 256)
	defer func() {
		for _, s := range touched {
			acc[s] = 0
		}
		putZeroedF32(acc)
	}()
	var ref float64
	for _, t := range terms {
		p := l.postings[t]
		if len(p) == 0 {
			continue
		}
		df := float64(len(p))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		ref = max(ref, idf*satCap)
		fidf := float32(idf)
		for _, x := range p {
			if acc[x.doc] == 0 {
				touched = append(touched, x.doc)
			}
			norm := bm25K1 * (1 - bm25B + bm25B*l.lens[x.doc]/avg)
			acc[x.doc] += fidf * x.tf * (bm25K1 + 1) / (x.tf + norm)
		}
	}
	if len(touched) == 0 {
		return nil
	}
	best := ref
	for _, s := range touched {
		best = max(best, float64(acc[s]))
	}
	hits := make([]lexHit, len(touched))
	for i, s := range touched {
		hits[i] = lexHit{slot: s, id: l.ids[s], score: float64(acc[s]) / best}
	}
	return hits
}

func (l *Lexical) Search(_ context.Context, query string, limit int, minScore float64) (Result, error) {
	all := l.scores(query)
	hits := all[:0]
	for _, h := range all {
		if h.Score >= minScore {
			hits = append(hits, h)
		}
	}
	return Result{Hits: TopHits(hits, limit)}, nil
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
