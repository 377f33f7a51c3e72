package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/search"
)

// benchData finds the shared development data (../shared/bench beside the
// checkout, or $TOOLGATE_BENCH_DATA).
func benchData(t *testing.T) string {
	t.Helper()
	cands := []string{filepath.Join("..", "..", "..", "shared", "bench", "retrieval"), filepath.Join("..", "..", "..", "..", "shared", "bench", "retrieval")}
	if d := os.Getenv("TOOLGATE_BENCH_DATA"); d != "" {
		cands = append([]string{filepath.Join(d, "retrieval")}, cands...)
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "tools.jsonl")); err == nil {
			return c
		}
	}
	t.Skipf("the development data is not beside the checkout (looked in %v; set TOOLGATE_BENCH_DATA)", cands)
	return ""
}

// TestScaleSmoke runs the scale benchmark at 5,000 distractors for
// correctness, not speed: the real index, catalogue store, int8 first pass
// with exact rescoring, near-duplicate folding and a warm restart, with
// the hashing embedder standing in for the model so it runs in seconds.
// It checks that every tool is catalogued, that the distractors cost
// little recall, that a warm restart ranks exactly as the first start,
// and that definitions read back from the store are the listed ones.
func TestScaleSmoke(t *testing.T) {
	data := benchData(t)
	tools, err := readJSONL[toolRow](filepath.Join(data, "tools.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := readJSONL[queryRow](filepath.Join(data, "queries_dev.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	rc := runConfig{mode: config.SearchHybrid, tools: tools, qs: qs, threshold: 0, weight: search.DefaultDenseWeight,
		distractors: n, gen: newDistractorGen(tools, 200, 0.1), synthetic: true, restart: true, emb: embed.NewHashing(384)}
	if err := rc.run(); err != nil {
		t.Fatal(err)
	}
	g := rc.out.gateway
	defer g.Close()
	if rc.out.warnings != 0 {
		t.Errorf("%d servers were listed with warnings", rc.out.warnings)
	}
	if rc.out.tools < len(tools)+n*9/10 || rc.out.tools > len(tools)+n {
		t.Errorf("%d tools catalogued for %d real and %d distractors", rc.out.tools, len(tools), n)
	}
	for _, s := range rc.out.base.sources() {
		before, after := rc.out.base.per[s].recall(2), rc.out.with.per[s].recall(2)
		t.Logf("%s: R@5 %.3f alone, %.3f with %d distractors", s, before, after, n)
		// The hashing embedder ranks far worse than the model, so this
		// bound catches a broken index (recall collapsing), not a tuning
		// regression; the model's figures are in bench/README.md.
		if before-after > 0.10 {
			t.Errorf("%s: R@5 fell from %.3f to %.3f with %d distractors", s, before, after, n)
		}
	}
	if !reflect.DeepEqual(rc.out.with.tops, rc.out.warm.tops) {
		for i := range rc.out.with.tops {
			if !slices.Equal(rc.out.with.tops[i], rc.out.warm.tops[i]) {
				t.Fatalf("query %q: top 5 %v before the restart, %v after", qs[i].Query, rc.out.with.tops[i], rc.out.warm.tops[i])
			}
		}
	}
	// Definitions come back from the store whole: the real tools' schemas
	// as listed, for whatever a search returns.
	byName := map[string]toolRow{}
	for _, tr := range tools {
		byName[tr.Server+"__"+tr.Name] = tr
	}
	checked := 0
	for _, q := range qs[:20] {
		res, _, err := g.Search(context.Background(), &extension.SearchRequest{Query: q.Query, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !strings.HasPrefix(r.Server, "synth-") {
				want := byName[r.Name]
				if r.Description != want.Description || !reflect.DeepEqual(r.InputSchema, any(want.InputSchema)) && !(want.InputSchema == nil && r.InputSchema == nil) {
					t.Fatalf("%s read back as %q %v, listed as %q %v", r.Name, r.Description, r.InputSchema, want.Description, want.InputSchema)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no real tool among the results to check")
	}
}
