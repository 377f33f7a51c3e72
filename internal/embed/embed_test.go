package embed

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHashing(t *testing.T) {
	e := NewHashing(128)
	if e.Dim() != 128 || e.ModelID() != "hashing-v1/128" {
		t.Fatalf("Dim/ModelID = %d %q", e.Dim(), e.ModelID())
	}
	v, err := e.Embed(context.Background(), []string{"search the web", "Search the WEB!", "delete a file", ""})
	if err != nil {
		t.Fatal(err)
	}
	if c := cosine(v[0], v[1]); c < 0.999 {
		t.Errorf("case/punctuation should not matter: cos=%f", c)
	}
	if c := cosine(v[0], v[2]); c > 0.5 {
		t.Errorf("unrelated texts too similar: cos=%f", c)
	}
	for _, x := range v[:3] {
		var n float64
		for _, f := range x {
			n += float64(f) * float64(f)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Errorf("norm² = %f", n)
		}
	}
	w, _ := e.Embed(context.Background(), []string{"search the web"})
	if !slices.Equal(v[0], w[0]) {
		t.Error("not deterministic")
	}
}

// TestTokenizerKnownIDs checks a few strings against token ids produced by
// the Hugging Face tokenizer (see testdata/reference.json).
func TestTokenizerKnownIDs(t *testing.T) {
	tok, err := LoadTokenizer(filepath.Join(modelDir(t), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string][]int32{
		"search the web":        {101, 3945, 1996, 4773, 102},
		"Hello, world!":         {101, 7592, 1010, 2088, 999, 102},
		"Crème brûlée à Zürich": {101, 13675, 21382, 7987, 9307, 2063, 1037, 10204, 102},
		"":                      {101, 102},
	} {
		if got := tok.Encode(text, MaxTokens); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
	}
	long := strings.Repeat("word ", 1000)
	if got := tok.Encode(long, MaxTokens); len(got) != MaxTokens || got[0] != 101 || got[MaxTokens-1] != 102 {
		t.Errorf("long input: %d ids, first %d last %d", len(got), got[0], got[len(got)-1])
	}
}

func FuzzTokenizer(f *testing.F) {
	dir, err := DefaultDir()
	var tok *Tokenizer
	if err == nil {
		tok, err = LoadTokenizer(filepath.Join(dir, "tokenizer.json"))
	}
	if err != nil {
		// Without the model, fuzz a tiny synthetic vocabulary.
		tok = tinyTokenizer(f)
	}
	for _, s := range []string{"", "hello world", "Crème brûlée", "使用必应", "🚀🚀", "a\x00b\xffc", strings.Repeat("x", 300), "##", "[CLS] [SEP]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, MaxTokens)
		if len(ids) < 2 || len(ids) > MaxTokens || ids[0] != tok.cls || ids[len(ids)-1] != tok.sep {
			t.Fatalf("Encode(%q) = %v", s, ids)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}

func tinyTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	vocab := map[string]int{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5, "##s": 6, "a": 7, "!": 8}
	tj := map[string]any{
		"normalizer":    map[string]any{"type": "BertNormalizer", "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"model":         map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab},
	}
	data, _ := json.Marshal(tj)
	tok, err := ParseTokenizer(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTinyTokenizer(t *testing.T) {
	tok := tinyTokenizer(t)
	if got, want := tok.Encode("Hello worlds! xyz", 0), []int32{2, 4, 5, 6, 8, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
}

// copyModel copies the installed model into a temp dir so tests can damage it.
func copyModel(t *testing.T) string {
	t.Helper()
	src := modelDir(t)
	dst := t.TempDir()
	for _, f := range []string{weightsFile, tokenizerFile, configFile} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestLoadBadFiles(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty dir: err = %v", err)
	}
	dir := copyModel(t)
	weights, _ := os.ReadFile(filepath.Join(dir, weightsFile))
	hlen := binary.LittleEndian.Uint64(weights)
	cases := []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"missing weights", weightsFile, nil, weightsFile},
		{"empty weights", weightsFile, []byte{}, "truncated"},
		{"huge header", weightsFile, binary.LittleEndian.AppendUint64(nil, 1<<40), "header length"},
		{"bad header JSON", weightsFile, append(binary.LittleEndian.AppendUint64(nil, 5), "{oops"...), "invalid safetensors header"},
		{"truncated data", weightsFile, weights[:len(weights)/2], "data offsets"},
		{"header only", weightsFile, weights[:8+hlen], "data offsets"},
		{"missing tensor", weightsFile, stWithout(t, weights, "encoder.layer.3.output.dense.weight"), "encoder.layer.3.output.dense.weight missing"},
		{"tokenizer not JSON", tokenizerFile, []byte("not json"), "tokenizer.json"},
		{"tokenizer wrong model", tokenizerFile, []byte(`{"model":{"type":"BPE"}}`), "WordPiece"},
		{"missing tokenizer", tokenizerFile, nil, "tokenizer.json"},
		{"config not JSON", configFile, []byte("{"), "config.json"},
		{"config bad dims", configFile, []byte(`{"hidden_size":384,"num_attention_heads":7,"num_hidden_layers":6,"intermediate_size":1536,"vocab_size":30522,"max_position_embeddings":512,"hidden_act":"gelu"}`), "num_attention_heads"},
		{"config vocab mismatch", configFile, []byte(`{"hidden_size":384,"num_attention_heads":12,"num_hidden_layers":6,"intermediate_size":1536,"vocab_size":1000,"max_position_embeddings":512,"hidden_act":"gelu"}`), "vocab_size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := copyModel(t)
			p := filepath.Join(d, tc.file)
			if tc.data == nil {
				os.Remove(p)
			} else if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(d)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q should mention %q and %s", err, tc.want, tc.file)
			}
		})
	}
}

// stWithout rewrites a safetensors file without the named tensor's header entry.
func stWithout(t *testing.T, buf []byte, name string) []byte {
	hlen := binary.LittleEndian.Uint64(buf)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:8+hlen], &h); err != nil {
		t.Fatal(err)
	}
	delete(h, name)
	nh, _ := json.Marshal(h)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(nh)))
	out = append(out, nh...)
	return append(out, buf[8+hlen:]...)
}

func TestDefaultDirEnv(t *testing.T) {
	t.Setenv(ModelDirEnv, t.TempDir())
	_, err := DefaultDir()
	if err == nil || !strings.Contains(err.Error(), "toolgate model install") {
		t.Errorf("err = %v, want a hint to run toolgate model install", err)
	}
}

func TestModelIDAndDim(t *testing.T) {
	m := loadTestModel(t)
	if m.Dim() != 384 {
		t.Errorf("Dim = %d", m.Dim())
	}
	if id := m.ModelID(); !strings.HasPrefix(id, "all-MiniLM-L6-v2/fp16@") || len(id) != len("all-MiniLM-L6-v2/fp16@")+12 {
		t.Errorf("ModelID = %q", id)
	}
	var _ Embedder = m
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Embed(ctx, []string{"a", "b", "c"}); err == nil {
		t.Error("Embed with cancelled context succeeded")
	}
}

// TestTruncationMatters guards against a reference that would pass with any
// truncation length: the >256-token reference text must differ noticeably
// from its 128-token truncation.
func TestTruncationMatters(t *testing.T) {
	m := loadTestModel(t)
	for _, it := range loadReference(t) {
		if len(it.IDs) <= MaxTokens {
			continue
		}
		ids := m.tok.Encode(it.Text, 128)
		out := [][]float32{make([]float32, 384)}
		m.forward(&workspace{}, []seq{{0, ids}}, 1, m.poolSink(out, PoolMean))
		if c := cosine(out[0], it.Vector); c > 0.9999 {
			t.Errorf("%.30q: 128-token truncation also matches the reference (cos %f)", it.Text, c)
		}
	}
}
