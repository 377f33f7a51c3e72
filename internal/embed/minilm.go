package embed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
)

// Embedder maps texts to unit-length vectors.
type Embedder interface {
	// Embed returns one Dim()-sized, L2-normalised vector per text.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dim is the vector dimensionality.
	Dim() int
	// ModelID identifies the model and its weights, e.g.
	// "all-MiniLM-L6-v2/fp16@6638f625a0a6"; it is part of on-disk cache keys,
	// so vectors computed under different ids must never be mixed.
	ModelID() string
}

// MiniLM is the all-MiniLM-L6-v2 sentence embedder (see the package doc).
// It is safe for concurrent use.
type MiniLM struct {
	cfg     bertConfig
	tok     *Tokenizer
	modelID string

	wordEmb []uint16  // [vocab][hidden], IEEE half precision (saves 23 MB)
	posEmb  []float32 // [maxPos][hidden]
	typeEmb []float32 // token type 0, [hidden]
	embLNg  []float32
	embLNb  []float32
	layers  []bertLayer

	// Threads is the number of goroutines Embed uses (default GOMAXPROCS,
	// at most 8). Set it before the first call to Embed.
	Threads int

	pool sync.Pool // *workspace
}

type bertLayer struct {
	qkv, qkvB  []float32 // packed [hidden][3·hidden]; query part pre-scaled by 1/sqrt(headDim)
	ao, aoB    []float32 // attention output dense, packed
	ln1g, ln1b []float32
	ff1, ff1B  []float32 // intermediate dense, packed
	ff2, ff2B  []float32 // output dense, packed
	ln2g, ln2b []float32
}

type bertConfig struct {
	HiddenSize       int     `json:"hidden_size"`
	NumLayers        int     `json:"num_hidden_layers"`
	NumHeads         int     `json:"num_attention_heads"`
	Intermediate     int     `json:"intermediate_size"`
	VocabSize        int     `json:"vocab_size"`
	MaxPositions     int     `json:"max_position_embeddings"`
	TypeVocabSize    int     `json:"type_vocab_size"`
	HiddenAct        string  `json:"hidden_act"`
	LayerNormEps     float64 `json:"layer_norm_eps"`
	PositionEmbedTyp string  `json:"position_embedding_type"`
}

// ModelName is the name part of MiniLM's ModelID.
const ModelName = "all-MiniLM-L6-v2"

// Load reads all-MiniLM-L6-v2 from dir (model.fp16.safetensors,
// tokenizer.json, config.json, as installed by `toolgate model install`).
// Errors name the offending file.
func Load(dir string) (*MiniLM, error) {
	m := &MiniLM{}
	cfgPath := filepath.Join(dir, configFile)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("embed: reading model config: %w (run `toolgate model install`)", err)
	}
	if err := json.Unmarshal(raw, &m.cfg); err != nil {
		return nil, fmt.Errorf("embed: %s: invalid JSON: %w", cfgPath, err)
	}
	if err := m.cfg.validate(); err != nil {
		return nil, fmt.Errorf("embed: %s: %w", cfgPath, err)
	}
	if m.tok, err = LoadTokenizer(filepath.Join(dir, tokenizerFile)); err != nil {
		return nil, err
	}
	if m.tok.VocabSize() != m.cfg.VocabSize {
		return nil, fmt.Errorf("embed: %s has %d tokens but %s says vocab_size %d",
			filepath.Join(dir, tokenizerFile), m.tok.VocabSize(), cfgPath, m.cfg.VocabSize)
	}
	wPath := filepath.Join(dir, weightsFile)
	buf, err := os.ReadFile(wPath)
	if err != nil {
		return nil, fmt.Errorf("embed: reading weights: %w (run `toolgate model install`)", err)
	}
	sum := sha256.Sum256(buf)
	m.modelID = ModelName + "/fp16@" + hex.EncodeToString(sum[:])[:12]
	if err := m.loadWeights(buf); err != nil {
		return nil, fmt.Errorf("embed: %s: %w", wPath, err)
	}
	// The file buffer and the unpacked fp32 copies are garbage now (~130 MB);
	// return them to the OS so the process stays small.
	buf = nil
	debug.FreeOSMemory()
	m.Threads = min(runtime.GOMAXPROCS(0), 8)
	return m, nil
}

func (c *bertConfig) validate() error {
	switch {
	case c.HiddenSize <= 0 || c.HiddenSize%nr != 0 || c.HiddenSize > 4096:
		return fmt.Errorf("unsupported hidden_size %d", c.HiddenSize)
	case c.NumHeads <= 0 || c.HiddenSize%c.NumHeads != 0:
		return fmt.Errorf("num_attention_heads %d does not divide hidden_size %d", c.NumHeads, c.HiddenSize)
	case c.NumLayers <= 0 || c.NumLayers > 64:
		return fmt.Errorf("unsupported num_hidden_layers %d", c.NumLayers)
	case c.Intermediate <= 0 || c.Intermediate%nr != 0 || c.Intermediate > 16384:
		return fmt.Errorf("unsupported intermediate_size %d", c.Intermediate)
	case c.VocabSize <= 0:
		return fmt.Errorf("invalid vocab_size %d", c.VocabSize)
	case c.MaxPositions < 2:
		return fmt.Errorf("invalid max_position_embeddings %d", c.MaxPositions)
	case c.HiddenAct != "gelu":
		return fmt.Errorf("unsupported hidden_act %q (want gelu)", c.HiddenAct)
	case c.PositionEmbedTyp != "" && c.PositionEmbedTyp != "absolute":
		return fmt.Errorf("unsupported position_embedding_type %q", c.PositionEmbedTyp)
	}
	if c.LayerNormEps <= 0 {
		c.LayerNormEps = 1e-12
	}
	return nil
}

func (m *MiniLM) loadWeights(buf []byte) error {
	isWordEmb := func(name string) bool { return strings.HasSuffix(name, "embeddings.word_embeddings.weight") }
	ts, err := parseSafetensors(buf, func(string) bool { return true }, isWordEmb)
	if err != nil {
		return err
	}
	H, I := m.cfg.HiddenSize, m.cfg.Intermediate
	checkShape := func(name string, shape ...int) (tensor, error) {
		t, ok := ts[name]
		if !ok {
			return t, fmt.Errorf("tensor %s missing", name)
		}
		if len(t.shape) != len(shape) {
			return t, fmt.Errorf("tensor %s has shape %v, want %v", name, t.shape, shape)
		}
		for i := range shape {
			if t.shape[i] != shape[i] {
				return t, fmt.Errorf("tensor %s has shape %v, want %v", name, t.shape, shape)
			}
		}
		return t, nil
	}
	get := func(name string, shape ...int) ([]float32, error) {
		t, err := checkShape(name, shape...)
		if err != nil {
			return nil, err
		}
		if t.data == nil {
			return nil, fmt.Errorf("tensor %s: unexpected dtype", name)
		}
		for _, v := range t.data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("tensor %s contains NaN or Inf", name)
			}
		}
		return t.data, nil
	}
	var errs []error
	must := func(name string, shape ...int) []float32 {
		d, err := get(name, shape...)
		if err != nil {
			errs = append(errs, err)
		}
		return d
	}
	// Some exports prefix tensor names with "bert."; accept both.
	prefix := ""
	if _, ok := ts["embeddings.word_embeddings.weight"]; !ok {
		if _, ok := ts["bert.embeddings.word_embeddings.weight"]; ok {
			prefix = "bert."
		}
	}
	if t, err := checkShape(prefix+"embeddings.word_embeddings.weight", m.cfg.VocabSize, H); err != nil {
		errs = append(errs, err)
	} else if t.half != nil {
		for _, h := range t.half {
			if h&0x7c00 == 0x7c00 {
				return fmt.Errorf("tensor %sembeddings.word_embeddings.weight contains NaN or Inf", prefix)
			}
		}
		m.wordEmb = t.half
	} else {
		// Not stored as F16: keep a half-precision copy anyway.
		m.wordEmb = make([]uint16, len(t.data))
		for i, v := range t.data {
			m.wordEmb[i] = f32ToF16(v)
		}
	}
	m.posEmb = must(prefix+"embeddings.position_embeddings.weight", m.cfg.MaxPositions, H)
	typ := must(prefix+"embeddings.token_type_embeddings.weight", max(m.cfg.TypeVocabSize, 1), H)
	if typ != nil {
		m.typeEmb = typ[:H]
	}
	m.embLNg = must(prefix+"embeddings.LayerNorm.weight", H)
	m.embLNb = must(prefix+"embeddings.LayerNorm.bias", H)
	scale := float32(1 / math.Sqrt(float64(H/m.cfg.NumHeads)))
	m.layers = make([]bertLayer, m.cfg.NumLayers)
	for l := range m.layers {
		p := fmt.Sprintf("%sencoder.layer.%d.", prefix, l)
		q := must(p+"attention.self.query.weight", H, H)
		k := must(p+"attention.self.key.weight", H, H)
		v := must(p+"attention.self.value.weight", H, H)
		qb := must(p+"attention.self.query.bias", H)
		kb := must(p+"attention.self.key.bias", H)
		vb := must(p+"attention.self.value.bias", H)
		ao := must(p+"attention.output.dense.weight", H, H)
		aoB := must(p+"attention.output.dense.bias", H)
		ln1g := must(p+"attention.output.LayerNorm.weight", H)
		ln1b := must(p+"attention.output.LayerNorm.bias", H)
		ff1 := must(p+"intermediate.dense.weight", I, H)
		ff1B := must(p+"intermediate.dense.bias", I)
		ff2 := must(p+"output.dense.weight", H, I)
		ff2B := must(p+"output.dense.bias", H)
		ln2g := must(p+"output.LayerNorm.weight", H)
		ln2b := must(p+"output.LayerNorm.bias", H)
		if len(errs) > 0 {
			return errs[0]
		}
		for i := range q {
			q[i] *= scale
		}
		qkvW := make([]float32, 0, 3*H*H)
		qkvW = append(append(append(qkvW, q...), k...), v...)
		qkvB := make([]float32, 0, 3*H)
		for _, x := range qb {
			qkvB = append(qkvB, x*scale)
		}
		qkvB = append(append(qkvB, kb...), vb...)
		m.layers[l] = bertLayer{
			qkv: packTransposed(nil, qkvW, H, 3*H, H), qkvB: qkvB,
			ao: packTransposed(nil, ao, H, H, H), aoB: aoB,
			ln1g: ln1g, ln1b: ln1b,
			ff1: packTransposed(nil, ff1, H, I, H), ff1B: ff1B,
			ff2: packTransposed(nil, ff2, I, H, I), ff2B: ff2B,
			ln2g: ln2g, ln2b: ln2b,
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Dim returns 384.
func (m *MiniLM) Dim() int { return m.cfg.HiddenSize }

// ModelID returns "all-MiniLM-L6-v2/fp16@" followed by the first 12 hex
// digits of the weights file's SHA-256 (as listed in models.sha256).
func (m *MiniLM) ModelID() string { return m.modelID }

// Tokenizer returns the model's tokenizer.
func (m *MiniLM) Tokenizer() *Tokenizer { return m.tok }

// maxBatchTokens bounds the tokens run through one forward pass (and so the
// workspace size: ~16 KB of activations per token).
const maxBatchTokens = 512

// Embed returns one 384-dim unit vector per text. Texts are truncated to
// 256 tokens. Large batches are split across Threads goroutines, a single
// text is computed with intra-operation parallelism.
func (m *MiniLM) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return m.embed(ctx, texts, PoolMean)
}

func (m *MiniLM) embed(ctx context.Context, texts []string, pool Pooling) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, ctx.Err()
	}
	dim := m.cfg.HiddenSize * len(pool.views())
	vecs := make([]float32, len(texts)*dim)
	for i := range out {
		out[i] = vecs[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out, m.run(ctx, m.encode(texts), m.poolSink(out, pool))
}

// Encode returns, from one forward pass, each text's vector pooled as pool
// says and its token vectors after each of the given 1-based layers: one
// row per token (with [CLS] and [SEP], truncated as Embed truncates), the
// layers' outputs side by side, so each row is len(layers)*Dim() long. A
// classifier can pool the tokens as it learned to.
func (m *MiniLM) Encode(ctx context.Context, texts []string, pool Pooling, layers ...int) (vecs, tokens [][]float32, err error) {
	H := m.cfg.HiddenSize
	for _, l := range layers {
		if l < 1 || l > len(m.layers) {
			return nil, nil, fmt.Errorf("embed: layer %d out of range 1..%d", l, len(m.layers))
		}
	}
	seqs := m.encode(texts)
	dim := H * len(pool.views())
	vecs, tokens = make([][]float32, len(texts)), make([][]float32, len(texts))
	flat := make([]float32, len(texts)*dim)
	for i := range vecs {
		vecs[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	for _, s := range seqs {
		tokens[s.idx] = make([]float32, len(s.ids)*H*len(layers))
	}
	if len(texts) == 0 {
		return vecs, tokens, ctx.Err()
	}
	pooled, w := m.poolSink(vecs, pool), H*len(layers)
	err = m.run(ctx, seqs, func(layer int, s seq, rows []float32) {
		pooled(layer, s, rows)
		for li, l := range layers {
			if l != layer {
				continue
			}
			for p := range len(s.ids) {
				copy(tokens[s.idx][p*w+li*H:p*w+(li+1)*H], rows[p*H:(p+1)*H])
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return vecs, tokens, nil
}

// encode tokenizes texts, truncated to what the model reads.
func (m *MiniLM) encode(texts []string) []seq {
	maxLen := min(MaxTokens, m.cfg.MaxPositions)
	seqs := make([]seq, len(texts))
	for i, t := range texts {
		seqs[i] = seq{idx: i, ids: m.tok.Encode(t, maxLen)}
	}
	return seqs
}

// run passes seqs through the model, handing each layer's token rows to
// sink.
func (m *MiniLM) run(ctx context.Context, seqs []seq, sink sink) error {
	total := 0
	for _, s := range seqs {
		total += len(s.ids)
	}
	threads := max(1, m.Threads)
	// Longest first: groups below are then filled with similar lengths, and
	// the greedy split across goroutines balances well.
	sort.SliceStable(seqs, func(a, b int) bool { return len(seqs[a].ids) > len(seqs[b].ids) })

	if threads == 1 || len(seqs) == 1 || total < 64 {
		return m.runGroup(ctx, seqs, threads, sink)
	}
	// Partition sequences across goroutines, balancing token counts
	// (attention cost makes long ones a bit heavier; close enough).
	groups := make([][]seq, threads)
	load := make([]int, threads)
	for _, s := range seqs {
		g := 0
		for j := range load {
			if load[j] < load[g] {
				g = j
			}
		}
		groups[g] = append(groups[g], s)
		load[g] += len(s.ids)
	}
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for g := range groups {
		if len(groups[g]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = m.runGroup(ctx, groups[g], 1, sink)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

type seq struct {
	idx int
	ids []int32
}

// runGroup embeds seqs (sorted by decreasing length) in forward passes of
// at most maxBatchTokens tokens, using par goroutines inside each pass.
func (m *MiniLM) runGroup(ctx context.Context, seqs []seq, par int, sink sink) error {
	ws, _ := m.pool.Get().(*workspace)
	if ws == nil {
		ws = &workspace{}
	}
	defer m.pool.Put(ws)
	for i := 0; i < len(seqs); {
		if err := ctx.Err(); err != nil {
			return err
		}
		j, tokens := i, 0
		for j < len(seqs) && (j == i || tokens+len(seqs[j].ids) <= maxBatchTokens) {
			tokens += len(seqs[j].ids)
			j++
		}
		m.forward(ws, seqs[i:j], par, sink)
		i = j
	}
	return nil
}
