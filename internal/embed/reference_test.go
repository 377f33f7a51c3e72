package embed

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// referenceItem is one entry of testdata/reference.json, produced by
// scripts/model/reference.mjs from an independent implementation.
type referenceItem struct {
	Text   string    `json:"text"`
	IDs    []int32   `json:"ids"` // untruncated HF token ids incl. [CLS]/[SEP]
	Vector []float32 `json:"vector"`
}

func loadReference(t testing.TB) []referenceItem {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Items []referenceItem `json:"items"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Items) == 0 {
		t.Fatal("reference.json has no items")
	}
	return doc.Items
}

// modelDir returns the installed model directory or skips the test, unless
// TOOLGATE_REQUIRE_MODEL=1, in which case a missing model fails the test.
func modelDir(t testing.TB) string {
	t.Helper()
	dir, err := DefaultDir()
	if err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_MODEL") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_MODEL=1 but the model is not installed: %v", err)
		}
		t.Skipf("model not installed (run `toolgate model install`): %v", err)
	}
	return dir
}

func TestTokenizerMatchesReference(t *testing.T) {
	tok, err := LoadTokenizer(filepath.Join(modelDir(t), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range loadReference(t) {
		got := tok.Encode(it.Text, 0)
		if !slices.Equal(got, it.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", it.Text, got, it.IDs)
		}
		want := it.IDs
		if len(want) > MaxTokens {
			want = append(slices.Clone(want[:MaxTokens-1]), want[len(want)-1])
		}
		if got := tok.Encode(it.Text, MaxTokens); !slices.Equal(got, want) {
			t.Errorf("Encode(%q, %d) truncation mismatch: got %d ids, want %d", it.Text, MaxTokens, len(got), len(want))
		}
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

var (
	testModelOnce sync.Once
	testModel     *MiniLM
	testModelErr  error
)

func loadTestModel(t testing.TB) *MiniLM {
	t.Helper()
	dir := modelDir(t)
	testModelOnce.Do(func() { testModel, testModelErr = Load(dir) })
	if testModelErr != nil {
		t.Fatal(testModelErr)
	}
	return testModel
}

func TestEmbedMatchesReference(t *testing.T) {
	m := loadTestModel(t)
	items := loadReference(t)
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Text
	}
	check := func(name string, vecs [][]float32) {
		for i, it := range items {
			if len(vecs[i]) != 384 || len(it.Vector) != 384 {
				t.Fatalf("%s: %q: dims %d / %d", name, it.Text, len(vecs[i]), len(it.Vector))
			}
			if c := cosine(vecs[i], it.Vector); c < 0.9999 {
				t.Errorf("%s: %q: cosine to reference %.6f < 0.9999", name, it.Text, c)
			} else if testing.Verbose() {
				t.Logf("%s: cos=%.7f %.40q", name, c, it.Text)
			}
		}
	}
	// One batch (grouped, parallel across goroutines) ...
	vecs, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	check("batch", vecs)
	// ... and one text at a time (intra-op parallel).
	single := make([][]float32, len(texts))
	for i, s := range texts {
		v, err := m.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		single[i] = v[0]
	}
	check("single", single)
}
