// Package search ranks tool definitions against a natural-language query.
// Index is the seam: the lexical BM25 ranker here is the baseline, and
// semantic rankers implement the same interface.
package search

import (
	"context"
	"runtime"
	"strings"
	"sync"
)

// Doc is the searchable text of one tool.
type Doc struct {
	// ID is the qualified name server__tool.
	ID          string
	Server      string
	Name        string
	Description string
	Params      []Param
}

// Param is one input-schema property.
type Param struct {
	Name        string
	Description string
}

// Text renders d the way embedding rankers see it:
// "server__tool: description. Parameters: p, q". Parameter descriptions are
// left out: they are mostly boilerplate shared by many tools (ids, paths,
// paging) and pull every tool of a server towards the same vector; on the
// retrieval benchmark leaving them out lifted dense Recall@5 on the azure
// queries from 0.741 to 0.970 (bench/README.md). The lexical ranker still
// indexes them.
func (d Doc) Text() string {
	var b strings.Builder
	b.WriteString(d.ID)
	b.WriteString(": ")
	b.WriteString(strings.TrimSpace(d.Description))
	if len(d.Params) > 0 {
		b.WriteString(". Parameters: ")
		for i, p := range d.Params {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.Name)
		}
	}
	return b.String()
}

// Hit is a ranked document. Score is in [0, 1]; see each Index for its scale.
type Hit struct {
	ID    string
	Score float64
}

// Result is the outcome of a search.
type Result struct {
	// Hits are sorted by descending score.
	Hits []Hit
	// Partial is set while indexing is still under way; Note says how far.
	Partial bool
	Note    string
}

// Index holds documents grouped by server and ranks them.
// Implementations are safe for concurrent use.
type Index interface {
	// Set replaces every document of server with docs.
	Set(ctx context.Context, server string, docs []Doc) error
	// Remove drops every document of server.
	Remove(server string)
	// Search returns up to limit hits with a score of at least minScore.
	Search(ctx context.Context, query string, limit int, minScore float64) (Result, error)
}

// Comparer is implemented by indexes that can tell how alike two
// documents are: the cosine of their vectors, ok false when either has
// none.
type Comparer interface {
	Cosine(a, b string) (cos float64, ok bool)
}

// ParallelFor runs f(0) … f(n−1) on every core in contiguous chunks and
// waits; small n run inline. Listing a server's thousands of tools is
// where this pays.
func ParallelFor(n int, f func(i int)) {
	par := min(runtime.GOMAXPROCS(0), 8)
	if par < 2 || n < 64 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + par - 1) / par
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				f(i)
			}
		}()
	}
	wg.Wait()
}
