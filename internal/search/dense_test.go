package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
)

// countingEmbedder counts embedded texts and can hold the indexer back.
type countingEmbedder struct {
	embed.Embedder
	texts atomic.Int64
	gate  chan struct{} // when non-nil, document batches wait for it to close
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if c.gate != nil && len(texts) > 0 && strings.Contains(texts[0], "__") {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

func newCounting() *countingEmbedder { return &countingEmbedder{Embedder: embed.NewHashing(64)} }

func wait(t *testing.T, b Background) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestVecCacheReopenAndTornTail(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenVecCache(dir, "m/1", 4)
	if err != nil {
		t.Fatal(err)
	}
	keys := [][32]byte{CacheKey("m/1", "a"), CacheKey("m/1", "b"), CacheKey("m/1", "c")}
	vecs := [][]float32{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0.5, -0.5}}
	if err := c.Put(keys, vecs); err != nil {
		t.Fatal(err)
	}
	// Duplicates are not written twice.
	if err := c.Put(keys[:1], vecs[:1]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := filepath.Join(dir, "m_1.vec")
	st, _ := os.Stat(path)
	full := st.Size()
	if want := int64(vecHeader + 3*(32+16)); full != want {
		t.Fatalf("file size %d, want %d", full, want)
	}
	// A crash mid-write leaves part of a record.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 40))
	f.Close()

	c, err = OpenVecCache(dir, "m/1", 4)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 3 {
		t.Fatalf("Len = %d after reopen", c.Len())
	}
	if st, _ := os.Stat(path); st.Size() != full {
		t.Fatalf("torn tail not cut: size %d, want %d", st.Size(), full)
	}
	for i, k := range keys {
		if v, ok := c.Get(k); !ok || !slices.Equal(v, vecs[i]) {
			t.Fatalf("Get %d = %v %v", i, v, ok)
		}
	}
	if _, ok := c.Get(CacheKey("m/1", "d")); ok {
		t.Fatal("unknown key found")
	}
	// Appends after the cut land on a record boundary.
	if err := c.Put([][32]byte{CacheKey("m/1", "d")}, [][]float32{{1, 1, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = OpenVecCache(dir, "m/1", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, ok := c.Get(CacheKey("m/1", "d")); c.Len() != 4 || !ok || v[3] != 1 {
		t.Fatalf("after append: len %d, %v %v", c.Len(), v, ok)
	}
	if _, err := OpenVecCache(dir, "m/1", 8); err == nil {
		t.Fatal("a cache of another dimension opened")
	}
}

func TestDenseUsesCacheAfterRestart(t *testing.T) {
	dir := t.TempDir()
	emb := newCounting()
	cache, err := OpenVecCache(dir, emb.ModelID(), emb.Dim())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDense(emb, cache, nil)
	docs := testDocs()
	d.Set(context.Background(), "fs", docs[:2])
	d.Set(context.Background(), "ev", docs[2:])
	wait(t, d)
	if got := emb.texts.Load(); got != 4 {
		t.Fatalf("embedded %d texts, want 4", got)
	}
	d.Close()
	cache.Close()

	emb2 := newCounting()
	cache, err = OpenVecCache(dir, emb2.ModelID(), emb2.Dim())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	d = NewDense(emb2, cache, nil)
	defer d.Close()
	d.Set(context.Background(), "fs", docs[:2])
	d.Set(context.Background(), "ev", docs[2:])
	if p := d.Pending(); p != 0 {
		t.Fatalf("Pending = %d after restart with every vector cached", p)
	}
	res, err := d.Search(context.Background(), "sum of two numbers", 1, 0)
	if err != nil || res.Partial || len(res.Hits) != 1 || res.Hits[0].ID != "ev__get-sum" {
		t.Fatalf("search after restart: %+v %v", res, err)
	}
	if got := emb2.texts.Load(); got != 1 { // the query only
		t.Fatalf("embedded %d texts after restart, want only the query", got)
	}
}

func TestHybridPartialWhilePending(t *testing.T) {
	emb := newCounting()
	emb.gate = make(chan struct{})
	h := NewHybrid(NewDense(emb, nil, nil))
	defer h.Close()
	ctx := context.Background()
	h.Set(ctx, "fs", testDocs()[:2])
	h.Set(ctx, "ev", testDocs()[2:])
	res, err := h.Search(ctx, "get-sum", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial || !strings.Contains(res.Note, "4 of 4") {
		t.Fatalf("Partial=%v Note=%q while nothing is embedded", res.Partial, res.Note)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != "ev__get-sum" {
		t.Fatalf("keyword search while indexing: %v", res.Hits)
	}
	if h.Pending() != 4 {
		t.Fatalf("Pending = %d", h.Pending())
	}
	close(emb.gate)
	wait(t, h)
	res, _ = h.Search(ctx, "get-sum", 5, 0)
	if res.Partial || res.Note != "" || res.Hits[0].ID != "ev__get-sum" {
		t.Fatalf("after indexing: %+v", res)
	}
	for _, x := range res.Hits {
		if x.Score < 0 || x.Score > 1 {
			t.Fatalf("score %v outside [0,1]", x.Score)
		}
	}
}

func TestRemovedServerNotFound(t *testing.T) {
	ctx := context.Background()
	emb := newCounting()
	emb.gate = make(chan struct{})
	h := NewHybrid(NewDense(emb, nil, nil))
	defer h.Close()
	h.Set(ctx, "fs", testDocs()[:2])
	h.Set(ctx, "ev", testDocs()[2:])
	// Removing a server whose documents are still queued settles Pending.
	h.Remove("ev")
	if p := h.Pending(); p != 2 {
		t.Fatalf("Pending = %d after removing a pending server", p)
	}
	close(emb.gate)
	wait(t, h)
	for _, q := range []string{"sum of two numbers", "echo", "get-sum"} {
		res, _ := h.Search(ctx, q, 10, 0)
		for _, x := range res.Hits {
			if strings.HasPrefix(x.ID, "ev__") {
				t.Fatalf("%q found removed %s", q, x.ID)
			}
		}
	}
	// Replacing a server's tools drops the old ones.
	h.Set(ctx, "fs", testDocs()[1:2])
	wait(t, h)
	res, _ := h.Search(ctx, "read file contents", 10, 0)
	if got := ids(res.Hits); !slices.Equal(got, []string{"fs__write_file"}) {
		t.Fatalf("after replace: %v", got)
	}
	h.Remove("fs")
	if res, _ := h.Search(ctx, "file", 10, 0); len(res.Hits) != 0 {
		t.Fatalf("empty index found %v", res.Hits)
	}
}

// TestSetDuringSearch runs searches while servers are replaced and removed
// and the indexer writes vectors; run it with -race.
func TestSetDuringSearch(t *testing.T) {
	ctx := context.Background()
	h := NewHybrid(NewDense(embed.NewHashing(32), nil, nil))
	defer h.Close()
	mk := func(server string, n int) []Doc {
		docs := make([]Doc, n)
		for i := range docs {
			docs[i] = Doc{ID: fmt.Sprintf("%s__tool%d", server, i), Server: server, Name: fmt.Sprintf("tool%d", i), Description: fmt.Sprintf("does thing number %d for %s", i, server)}
		}
		return docs
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := fmt.Sprintf("s%d", (i+w)%5)
				if i%7 == 3 {
					h.Remove(s)
				} else {
					h.Set(ctx, s, mk(s, 1+i%40))
				}
			}
		}()
	}
	for i := range 300 {
		if _, err := h.Search(ctx, fmt.Sprintf("thing number %d", i%50), 5, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Dense.Search(ctx, "thing", 5, 0.1); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	wait(t, h)
	for s := range 5 {
		h.Set(ctx, fmt.Sprintf("s%d", s), mk(fmt.Sprintf("s%d", s), 3))
	}
	wait(t, h)
	res, _ := h.Search(ctx, "does thing number 2 for s4", 1, 0)
	if len(res.Hits) != 1 || res.Hits[0].ID != "s4__tool2" {
		t.Fatalf("after churn: %v", res.Hits)
	}
	if n := len(h.Dense.slot); n != 15 {
		t.Fatalf("%d live dense slots, want 15", n)
	}
}

func TestParallelCosinesMatchSerial(t *testing.T) {
	d := NewDense(embed.NewHashing(384), nil, nil)
	defer d.Close()
	var docs []Doc
	for i := range 2000 {
		docs = append(docs, Doc{ID: fmt.Sprintf("s__t%d", i), Name: fmt.Sprintf("t%d", i), Description: fmt.Sprintf("word%d word%d", i%37, i%101)})
	}
	d.Set(context.Background(), "s", docs)
	wait(t, d)
	q, _ := d.queryVec(context.Background(), "word3 word7")
	par := make([]float32, len(d.ids))
	d.cosinesLocked(q, par)
	for s := range d.ids {
		if want := dot(q, d.exact[s*d.dim:(s+1)*d.dim]); math.Abs(float64(par[s]-want)) > 0.02 {
			t.Fatalf("slot %d: %v, want %v", s, par[s], want)
		}
	}
}

func TestDotRowsOddSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dim := range []int{1, 7, 32, 64, 100, 384} {
		rows := 9
		q := make([]float32, dim)
		m := make([]float32, dim*rows)
		for i := range q {
			q[i] = rng.Float32() - 0.5
		}
		for i := range m {
			m[i] = rng.Float32() - 0.5
		}
		out := make([]float32, rows)
		dotRows(q, m, dim, out)
		for r := range rows {
			if want := dot(q, m[r*dim:(r+1)*dim]); math.Abs(float64(out[r]-want)) > 1e-4 {
				t.Fatalf("dim %d row %d: %v, want %v", dim, r, out[r], want)
			}
		}
	}
}

func TestTopHits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := rng.IntN(300)
		hits := make([]Hit, n)
		for i := range hits {
			hits[i] = Hit{ID: fmt.Sprint(i), Score: float64(rng.IntN(20)) / 20}
		}
		want := slices.Clone(hits)
		SortHits(want)
		k := rng.IntN(n+2) - 1
		got := TopHits(slices.Clone(hits), k)
		if k > 0 && k < n {
			want = want[:k]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d k=%d: got %v want %v", n, k, got, want)
		}
	}
}

// TestCloseDoesNotWaitForTheQueue: shutting down with thousands of tools
// still to embed returns at once (issue: SIGTERM waited 58 s for 3,000
// tools); what was embedded before is in the vector cache, so a restart
// embeds only the rest.
func TestCloseDoesNotWaitForTheQueue(t *testing.T) {
	dir := t.TempDir()
	emb := newCounting()
	emb.gate = make(chan struct{})
	cache, err := OpenVecCache(dir, emb.ModelID(), emb.Dim())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDense(emb, cache, nil)
	const n = 3000
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = Doc{ID: fmt.Sprintf("s__tool%d", i), Server: "s", Name: fmt.Sprintf("tool%d", i), Description: fmt.Sprintf("does task number %d", i)}
	}
	d.Set(context.Background(), "s", docs)
	// Let exactly one batch through, then hold the indexer in the next.
	release := make(chan struct{})
	go func() {
		emb.gate <- struct{}{}
		close(release)
	}()
	<-release
	for d.Pending() > n-embedBatch {
		time.Sleep(5 * time.Millisecond)
	}

	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		close(emb.gate) // unblock the old code so the test ends
		t.Fatal("Close waited for the embedding queue")
	}
	if p := d.Pending(); p < n-2*embedBatch {
		t.Fatalf("Pending after Close = %d: the queue was embedded instead of dropped", p)
	}
	cache.Close()

	cache, err = OpenVecCache(dir, emb.ModelID(), emb.Dim())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if got := cache.Len(); got != embedBatch {
		t.Fatalf("vector cache holds %d vectors after Close, want the %d embedded before it", got, embedBatch)
	}
}

// orderEmbedder records which server each document batch came from.
type orderEmbedder struct {
	countingEmbedder
	mu      sync.Mutex
	batches []string
}

func (o *orderEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) > 0 && strings.Contains(texts[0], "__") {
		server, _, _ := strings.Cut(texts[0], "__")
		o.mu.Lock()
		o.batches = append(o.batches, server)
		o.mu.Unlock()
	}
	return o.countingEmbedder.Embed(ctx, texts)
}

// A server listed after a much larger one waits at most one batch per
// server ahead of it (here the big one's batch being embedded and its
// next), not for every document of the large one: loading a server with
// thousands of tools does not leave the others keyword-only meanwhile.
func TestDenseServesServersInTurn(t *testing.T) {
	emb := &orderEmbedder{countingEmbedder: countingEmbedder{Embedder: embed.NewHashing(64), gate: make(chan struct{})}}
	d := NewDense(emb, nil, nil)
	defer d.Close()
	ctx := context.Background()
	big := make([]Doc, 10*embedBatch)
	for i := range big {
		big[i] = Doc{ID: fmt.Sprintf("big__tool_%d", i), Server: "big", Name: fmt.Sprintf("tool_%d", i), Description: "A tool of the big server"}
	}
	d.Set(ctx, "big", big)
	d.Set(ctx, "small", []Doc{{ID: "small__ping", Server: "small", Name: "ping", Description: "Ping"}})
	close(emb.gate)
	wait(t, d)
	emb.mu.Lock()
	defer emb.mu.Unlock()
	if i := slices.Index(emb.batches, "small"); i < 0 || i > 2 {
		t.Fatalf("batches by server %v: the small server waited behind %d batches of the big one, want at most 2", emb.batches, i)
	}
	if n := len(emb.batches); n != 11 {
		t.Fatalf("%d batches (%v), want 11", n, emb.batches)
	}
}

// Replacing or removing a server drops its waiting documents from the
// line: nothing of it is embedded, and the line does not grow with
// repeated listings.
func TestDenseRemoveDropsQueue(t *testing.T) {
	emb := &orderEmbedder{countingEmbedder: countingEmbedder{Embedder: embed.NewHashing(64), gate: make(chan struct{})}}
	d := NewDense(emb, nil, nil)
	defer d.Close()
	ctx := context.Background()
	docs := func(server string, n int) []Doc {
		out := make([]Doc, n)
		for i := range out {
			out[i] = Doc{ID: fmt.Sprintf("%s__t%d", server, i), Server: server, Name: fmt.Sprintf("t%d", i), Description: "x"}
		}
		return out
	}
	for range 100 {
		d.Set(ctx, "flap", docs("flap", 3))
	}
	d.Set(ctx, "gone", docs("gone", 3))
	d.Remove("gone")
	d.mu.RLock()
	turns := len(d.turn)
	d.mu.RUnlock()
	if turns > 2 { // the worker may hold one batch of its own
		t.Fatalf("after 100 listings of one server the line holds %d turns", turns)
	}
	close(emb.gate)
	wait(t, d)
	emb.mu.Lock()
	defer emb.mu.Unlock()
	if slices.Contains(emb.batches, "gone") {
		t.Fatalf("a removed server's documents were embedded: %v", emb.batches)
	}
}

// TestHybridExplainParts: the hybrid score is the weighted sum of the
// parts Explain reports, and Explain has no dense part for a document not
// embedded yet.
func TestHybridExplainParts(t *testing.T) {
	emb := newCounting()
	emb.gate = make(chan struct{})
	h := NewHybrid(NewDense(emb, nil, nil))
	defer h.Close()
	ctx := context.Background()
	h.Set(ctx, "ev", testDocs()[2:])
	parts, err := h.Explain(ctx, "get-sum")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := parts["ev__get-sum"]; !ok || p.Lexical <= 0 || p.Dense != nil {
		t.Fatalf("before embedding: %+v", parts)
	}
	close(emb.gate)
	wait(t, h)
	res, _ := h.Search(ctx, "get-sum", 5, 0)
	if parts, err = h.Explain(ctx, "get-sum"); err != nil {
		t.Fatal(err)
	}
	for _, hit := range res.Hits {
		p, ok := parts[hit.ID]
		if !ok && hit.Score == 0 {
			continue // no part above zero: Explain leaves it out
		}
		if p.Dense == nil {
			t.Fatalf("%s: no dense part after embedding", hit.ID)
		}
		if want := h.Weight**p.Dense + (1-h.Weight)*p.Lexical; math.Abs(want-hit.Score) > 1e-5 {
			t.Errorf("%s: score %v, parts give %v (%+v)", hit.ID, hit.Score, want, p)
		}
	}
}
