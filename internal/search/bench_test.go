package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/embed"
)

// BenchmarkHybridSearch20k measures a hybrid search over 20,000 tools
// without the query embedding (the query vector is cached after the first
// call): the cosine scan, the BM25 pass, fusion and top-k selection.
func BenchmarkHybridSearch20k(b *testing.B) {
	ctx := context.Background()
	h := NewHybrid(NewDense(embed.NewHashing(384), nil, nil))
	defer h.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("read write file list create delete update get search query user account storage " +
		"resource group subscription database table row column message channel issue repository branch commit " +
		"price stock weather news image chart document slide page browser click navigate calendar event email")
	pick := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	for s := range 1000 {
		server := fmt.Sprintf("srv%d", s)
		docs := make([]Doc, 20)
		for i := range docs {
			name := strings.ReplaceAll(pick(2), " ", "_")
			docs[i] = Doc{ID: fmt.Sprintf("%s__%s%d", server, name, i), Server: server, Name: name, Description: pick(15),
				Params: []Param{{Name: "id", Description: pick(5)}, {Name: "query", Description: pick(5)}}}
		}
		h.Set(ctx, server, docs)
	}
	if err := h.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	queries := []string{"read a file from the repository", "list storage accounts in my subscription",
		"what is the stock price today", "send a message to the channel about the new issue"}
	for _, q := range queries {
		h.Search(ctx, q, 1000, 0.3)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := h.Search(ctx, queries[i%len(queries)], 1000, 0.3); err != nil {
			b.Fatal(err)
		}
	}
}
