package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/quick"

	"github.com/toolgate/toolgate/internal/embed"
)

// The vector kernel computes exactly what the portable loop computes, for
// every sign and magnitude int8 can hold, over row counts that exercise
// the loop edges.
func TestDotRowsI8MatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dim := range []int{32, 64, 384} {
		for _, rows := range []int{0, 1, 3, 17} {
			q := make([]int16, dim)
			for i := range q {
				q[i] = int16(rng.IntN(255) - 127)
			}
			q[0] = -127
			m := make([]int8, rows*dim)
			for i := range m {
				m[i] = int8(rng.IntN(255) - 127)
			}
			if rows > 0 {
				m[0] = -127
			}
			got, want := make([]int32, rows), make([]int32, rows)
			dotRowsI8(q, m, dim, got)
			dotRowsI8Go(q, m, dim, want)
			for r := range want {
				var exact int32
				for i := range dim {
					exact += int32(q[i]) * int32(m[r*dim+i])
				}
				if got[r] != want[r] || want[r] != exact {
					t.Fatalf("dim %d row %d: kernel %d, portable %d, exact %d", dim, r, got[r], want[r], exact)
				}
			}
		}
	}
}

// Quantised cosines stay within 0.02 of the exact ones for unit vectors.
func TestQuantisedCosine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 384
	unit := func() []float32 {
		v := make([]float32, dim)
		var s float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			s += float64(v[i] * v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(s))
		}
		return v
	}
	for range 200 {
		a, b := unit(), unit()
		// Mix so the cosine spans the range scores take.
		mix := rng.Float32()
		for i := range b {
			b[i] = mix*a[i] + (1-mix)*b[i]
		}
		qa, sa := quantiseQuery(a)
		qb := make([]int8, dim)
		sb := quantise(b, qb)
		var nb float64
		for _, x := range b {
			nb += float64(x * x)
		}
		out := make([]int32, 1)
		dotRowsI8(qa, qb, dim, out)
		got := float64(out[0]) * float64(sa) * float64(sb)
		want := float64(dot(a, b))
		if math.Abs(got-want) > 0.02 {
			t.Fatalf("quantised dot %.4f, exact %.4f", got, want)
		}
	}
}

// The top of a ranking carries exact float32 cosines, read back from the
// embedding cache (or from memory without one), not the int8 estimates.
func TestSearchRescoresExactly(t *testing.T) {
	ctx := context.Background()
	emb := embed.NewHashing(384)
	for _, withCache := range []bool{false, true} {
		var cache *VecCache
		if withCache {
			c, err := OpenVecCache(t.TempDir(), emb.ModelID(), emb.Dim())
			if err != nil {
				t.Fatal(err)
			}
			cache = c
			defer c.Close()
		}
		d := NewDense(emb, cache, nil)
		var docs []Doc
		for i := range 300 {
			docs = append(docs, Doc{ID: fmt.Sprintf("s__t%d", i), Name: fmt.Sprintf("t%d", i), Description: fmt.Sprintf("word%d word%d alpha", i%13, i%29)})
		}
		d.Set(ctx, "s", docs)
		wait(t, d)
		const query = "word3 word7 alpha"
		res, err := d.Search(ctx, query, 10, 0)
		if err != nil || len(res.Hits) != 10 {
			t.Fatalf("Search = %v, %v", res.Hits, err)
		}
		qv, _ := emb.Embed(ctx, []string{query})
		byID := map[string]Doc{}
		for _, doc := range docs {
			byID[doc.ID] = doc
		}
		for _, h := range res.Hits {
			dv, _ := emb.Embed(ctx, []string{byID[h.ID].Text()})
			if want := clamp01(dot(qv[0], dv[0])); math.Abs(h.Score-want) > 1e-6 {
				t.Fatalf("cache %v: %s scored %.6f, exact cosine %.6f", withCache, h.ID, h.Score, want)
			}
		}
		d.Close()
	}
}

// The ASCII fast path tokenizes exactly as the general one does.
func TestTokenizeASCIIMatchesGeneral(t *testing.T) {
	general := func(text string) []string {
		// Force the rune path with a non-ASCII character that is a
		// separator (a no-break space) at the end.
		return Tokenize(text + "\u00a0")
	}
	for _, text := range []string{
		"getFileInfo HTTPServer read_file a-b.c/d", "List the Azure storage accounts in subscription X2 ABCd",
		"", "   ", "x", "AB", "aB", "Ab", "ABC", "fooBAR", "fooBARbaz", "v2Beta", "9lives", "the of and",
		"Creates a NEW GitHub issue; returns {id, url}. Use when: the user wants to file a bug.",
	} {
		got, want := Tokenize(text), general(text)
		if !slices.Equal(got, want) {
			t.Errorf("%q: fast path %q, general %q", text, got, want)
		}
	}
	f := func(b []byte) bool {
		s := strings.Map(func(r rune) rune { return r & 0x7f }, string(b))
		return slices.Equal(Tokenize(s), general(s))
	}
	if err := quick.Check(f, nil); err != nil {
		t.Error(err)
	}
}
