package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/poison"
)

// doc is one labelled text for training or evaluation.
type doc struct {
	id, text, source, category string
	malicious                  bool
	// attack is the injected instruction of a malicious output (its parts are
	// the positives); empty for definitions, whose positives are found by
	// multiple-instance learning.
	attack string
	// group keeps a clean output and its attacked copies in the same fold.
	group string
}

// defDocs returns the development definitions and the authored ones.
func defDocs(dev, authored []row) []doc {
	var out []doc
	for _, set := range [][]row{dev, authored} {
		for _, r := range set {
			g := r.Pair
			if g == "" {
				g = r.ID
			}
			out = append(out, doc{id: r.ID, text: r.Text, source: r.Source, category: r.Category, malicious: r.Label == "malicious", group: g})
		}
	}
	return out
}

// outDocs returns the development outputs.
func outDocs(dev []row) []doc {
	var out []doc
	for _, r := range dev {
		g := r.ContextID
		if g == "" {
			g = r.ID
		}
		out = append(out, doc{id: r.ID, text: r.Text, source: r.Source, category: r.Category, malicious: r.Label == "malicious", attack: r.AttackText, group: g})
	}
	return out
}

// compose turns a batch of authored outputs into documents: attack i goes
// into carrier i mod n at the start, middle or end (i mod 3), and every
// carrier is a clean document too.
func compose(rows []row, source string) []doc {
	var attacks, carriers []row
	for _, r := range rows {
		if r.Role == "attack" {
			attacks = append(attacks, r)
		} else {
			carriers = append(carriers, r)
		}
	}
	var out []doc
	for _, c := range carriers {
		out = append(out, doc{id: c.ID, text: c.Text, source: source, category: "clean", group: c.ID})
	}
	if len(carriers) == 0 {
		return out
	}
	for i, a := range attacks {
		c := carriers[i%len(carriers)]
		out = append(out, doc{id: a.ID, text: insert(c.Text, a.Text, i%3), source: source, category: a.Category, malicious: true, attack: a.Text, group: c.ID})
	}
	return out
}

// insert puts an injection at the start (0), middle (1) or end (2) of text.
func insert(text, inj string, pos int) string {
	switch pos {
	case 0:
		return inj + "\n" + text
	case 2:
		return text + "\n" + inj
	}
	lines := strings.Split(text, "\n")
	k := len(lines) / 2
	return strings.Join(lines[:k], "\n") + "\n" + inj + "\n" + strings.Join(lines[k:], "\n")
}

// cachedEmbedder memoises vectors by text on disk, so that repeated runs of
// the benchmark do not recompute thousands of embeddings.
type cachedEmbedder struct {
	embed.Embedder
	m     *embed.MiniLM
	path  string
	vecs  map[[32]byte][]float32
	dirty bool
}

func newCachedEmbedder() (*cachedEmbedder, error) {
	dir, err := embed.DefaultDir()
	if err != nil {
		return nil, err
	}
	m, err := embed.Load(dir)
	if err != nil {
		return nil, err
	}
	c := &cachedEmbedder{Embedder: m.Pooled(pooling), m: m, vecs: map[[32]byte][]float32{}}
	if cd, err := os.UserCacheDir(); err == nil {
		id := strings.NewReplacer("/", "_", "@", "_", "+", "_").Replace(c.ModelID())
		c.path = filepath.Join(cd, "toolgate", "bench-poisoning-"+id+".gob")
		if f, err := os.Open(c.path); err == nil {
			_ = gob.NewDecoder(f).Decode(&c.vecs)
			f.Close()
		}
	}
	return c, nil
}

func (c *cachedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out, added, err := cached(c.vecs, texts, func(miss []string) ([][]float32, error) {
		return c.Embedder.Embed(ctx, miss)
	})
	c.dirty = c.dirty || added
	return out, err
}

// cached returns the value of each text from m (keyed by SHA-256),
// computing the missing ones in batches of 64 and adding them to m;
// added says whether it did.
func cached[V any](m map[[32]byte]V, texts []string, compute func([]string) ([]V, error)) (out []V, added bool, err error) {
	out = make([]V, len(texts))
	var miss []string
	var idx []int
	for i, t := range texts {
		if v, ok := m[sha256.Sum256([]byte(t))]; ok {
			out[i] = v
		} else {
			miss, idx = append(miss, t), append(idx, i)
		}
	}
	for lo := 0; lo < len(miss); lo += 64 {
		hi := min(lo+64, len(miss))
		vs, err := compute(miss[lo:hi])
		if err != nil {
			return nil, added, err
		}
		for j, v := range vs {
			out[idx[lo+j]] = v
			m[sha256.Sum256([]byte(miss[lo+j]))] = v
			added = true
		}
	}
	return out, added, nil
}

// EmbedTokens gives the classifier token vectors for attention (not
// cached: only the scans of held-out rows ask for them).
func (c *cachedEmbedder) EmbedTokens(ctx context.Context, texts []string, layers ...int) (vecs, tokens [][]float32, err error) {
	return c.m.Encode(ctx, texts, pooling, layers...)
}

func (c *cachedEmbedder) save() {
	if !c.dirty || c.path == "" {
		return
	}
	_ = os.MkdirAll(filepath.Dir(c.path), 0o755)
	tmp := c.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
	if err := gob.NewEncoder(f).Encode(c.vecs); err == nil && f.Close() == nil {
		_ = os.Rename(tmp, c.path)
	}
}

// pooling is how the bench's embedder pools MiniLM's token vectors (flag
// -pooling): by default the committed weights' pooling, so that they are
// measured, and retrained, as they were trained.
var pooling = func() embed.Pooling {
	if m, err := poison.BuiltinModels(); err == nil && m.Pooling != "" {
		if p, err := embed.ParsePooling(m.Pooling); err == nil {
			return p
		}
	}
	return embed.PoolMean
}()

// poolingName is the Models.Pooling of weights trained with pooling.
func poolingName() string {
	if pooling == embed.PoolMean {
		return ""
	}
	return pooling.String()
}

// instance is one part of a document with its feature vector.
type instance struct {
	x     []float32
	grams []int    // hashed n-gram buckets
	doc   int      // index into the docs slice
	tok   []uint16 // token vectors (-attn), bfloat16
}

// hashBits is log2 of the hashed n-gram buckets of the trained models.
const hashBits = 14

// featurize embeds every part of every document (and of every attack).
type featurized struct {
	parts  [][]instance // per doc: its parts
	attack [][]instance // per doc: the parts of its injected instruction
	whole  []int        // per doc: index of the whole-text part, or -1
	tokens int          // width of the instances' token rows (tokenStore.attach); 0: none
	// mix, when set, holds per doc and part the definition model's logit,
	// which takes share of each part's logit (outputDefinitionShare).
	mix   [][]float64
	share float64
}

// featurize embeds the parts of docs; the structural features named in
// drop and the dimensions of the embedding views named in dropViews are
// held at zero, so that a model trained on them gives them no weight.
func featurize(emb embed.Embedder, docs []doc, drop, dropViews []string) (*featurized, error) {
	views := pooling.Views()
	if emb.Dim()%len(views) != 0 {
		return nil, fmt.Errorf("featurize: %d dimensions are not %d views", emb.Dim(), len(views))
	}
	per := emb.Dim() / len(views)
	f := &featurized{parts: make([][]instance, len(docs)), attack: make([][]instance, len(docs)), whole: make([]int, len(docs))}
	vec := func(i int, parts []string) ([]instance, error) {
		vs, err := emb.Embed(context.Background(), parts)
		if err != nil {
			return nil, err
		}
		out := make([]instance, len(parts))
		for j, p := range parts {
			feats := poison.Features(p)
			for k, name := range poison.FeatureNames {
				if slices.Contains(drop, name) {
					feats[k] = 0
				}
			}
			x := append(slices.Clone(vs[j]), feats...)
			for k, v := range views {
				if slices.Contains(dropViews, v) {
					clear(x[k*per : (k+1)*per])
				}
			}
			out[j] = instance{x: x, grams: poison.Ngrams(p, hashBits), doc: i}
		}
		return out, nil
	}
	for i, d := range docs {
		parts := poison.Parts(scored(d.text))
		f.whole[i] = -1
		if len(parts) > 0 && parts[0] == strings.Join(strings.Fields(scored(d.text)), " ") {
			f.whole[i] = 0
		}
		var err error
		if f.parts[i], err = vec(i, parts); err != nil {
			return nil, err
		}
		if d.attack != "" {
			if f.attack[i], err = vec(i, poison.Parts(scored(d.attack))); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// unquotedTraining is -unquoted: featurise the text the detector's
// classifier scores, with quoted examples replaced (poison.Unquoted).
var unquotedTraining = true

// scored is the text of a document that the classifier reads.
func scored(text string) string {
	if unquotedTraining {
		return poison.Unquoted(text)
	}
	return text
}

// logistic is a trained model in float64 while training: a logistic
// regression, or (hw set) a one-hidden-layer MLP whose hashed n-gram
// weights stay a linear term of the output.
type logistic struct {
	w []float64
	u []float64 // hashed n-gram weights
	b float64
	// The MLP: hidden weights (unit after unit, each len(x) long), hidden
	// biases and output weights, with the standardisation folded in.
	hw, hb, ho []float64
	att        tokenPooler // token features appended to the features (-attn, -conv)
}

func (m *logistic) score(in instance) float64 {
	z := m.b
	for i, w := range m.w {
		z += w * float64(in.x[i])
	}
	if m.hw != nil {
		dim := len(in.x)
		for k, c := range m.hb {
			a := c
			row := m.hw[k*dim : (k+1)*dim]
			for i, v := range in.x {
				a += row[i] * float64(v)
			}
			if a > 0 {
				z += m.ho[k] * a
			}
		}
	}
	for _, g := range in.grams {
		z += m.u[g]
	}
	return 1 / (1 + math.Exp(-z))
}

// modelKind is the definition and output model the trainer fits (flag
// -model): "logistic", "mlp", or "ensemble" (the mean of the two models'
// logits, one model with a linear and a hidden term). The output gate is
// always logistic.
var modelKind = "logistic"

// The MLP's shape and training: mlpUnits ReLU units, mini-batches of
// mlpBatch instances in an order shuffled per epoch by a generator seeded
// with mlpSeed (deterministic), mlpEpochs epochs of Adam at rate mlpLR, L2
// penalty mlpL2 on the (standardised) hidden and output weights.
var (
	mlpUnits  = 32
	mlpEpochs = 12
	mlpBatch  = 64
	mlpLR     = 0.003
	mlpL2     = 3e-2
	mlpSeed   = uint64(15)
)

// fit trains the model modelKind names.
func fit(ins []instance, ys []bool) *logistic {
	switch modelKind {
	case "mlp":
		return fitMLP(ins, ys)
	case "ensemble":
		return average(fitLogistic(ins, ys), fitMLP(ins, ys))
	}
	return fitLogistic(ins, ys)
}

// average returns the model whose logit is the mean of a logistic
// regression's and an MLP's: halves of both, summed.
func average(lr, mlp *logistic) *logistic {
	m := &logistic{w: make([]float64, len(lr.w)), u: make([]float64, len(lr.u)), b: (lr.b + mlp.b) / 2, hw: mlp.hw, hb: mlp.hb, ho: make([]float64, len(mlp.ho))}
	for i, w := range lr.w {
		m.w[i] = w / 2
	}
	for i := range m.u {
		m.u[i] = (lr.u[i] + mlp.u[i]) / 2
	}
	for k, o := range mlp.ho {
		m.ho[k] = o / 2
	}
	return m
}

// fitMLP trains a one-hidden-layer ReLU network, class-balanced like
// fitLogistic, on standardised inputs (folded back into the first layer),
// with fixed-order mini-batch Adam from a seeded initialisation.
func fitMLP(ins []instance, ys []bool) *logistic {
	xs, mu, sd := standardize(ins)
	dim, nh, units, n := len(mu), 1<<hashBits, mlpUnits, len(xs)
	npos, nneg := classCounts(ys)
	wpos, wneg := posWeight/max(npos, 1), (1-posWeight)/max(nneg, 1)
	// Parameters: hidden weights, hidden biases, output weights, hashed
	// weights, the output bias.
	oC, oV := units*dim, units*dim+units
	oU := oV + units
	oB := oU + nh
	p := make([]float64, oB+1)
	rng := rand.New(rand.NewPCG(mlpSeed, 0))
	he := math.Sqrt(2 / float64(dim))
	for j := range oC {
		p[j] = rng.NormFloat64() * he
	}
	for k := range units {
		p[oV+k] = rng.NormFloat64() / math.Sqrt(float64(units))
	}
	const b1, b2 = 0.9, 0.999
	mw, vw, g := make([]float64, len(p)), make([]float64, len(p)), make([]float64, len(p))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	act := make([]float64, units)
	t := 0
	for range mlpEpochs {
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		for lo := 0; lo < n; lo += mlpBatch {
			hi := min(lo+mlpBatch, n)
			clear(g)
			// The batch stands for the whole set: its loss is scaled up so
			// that the penalty weighs as in full-batch training.
			scale := float64(n) / float64(hi-lo)
			for _, i := range order[lo:hi] {
				x := xs[i]
				z := p[oB]
				for _, h := range ins[i].grams {
					z += p[oU+h]
				}
				for k := range units {
					a := p[oC+k]
					row := p[k*dim : (k+1)*dim]
					for j, v := range x {
						a += row[j] * v
					}
					act[k] = max(a, 0)
					z += p[oV+k] * act[k]
				}
				pr := 1 / (1 + math.Exp(-z))
				wt, y := wneg, 0.0
				if ys[i] {
					wt, y = wpos, 1
				}
				e := wt * (pr - y) * scale
				g[oB] += e
				for _, h := range ins[i].grams {
					g[oU+h] += e
				}
				for k := range units {
					if act[k] <= 0 {
						continue
					}
					g[oV+k] += e * act[k]
					d := e * p[oV+k]
					g[oC+k] += d
					grow := g[k*dim : (k+1)*dim]
					for j, v := range x {
						grow[j] += d * v
					}
				}
			}
			for j := range oC {
				g[j] += mlpL2 * p[j]
			}
			for j := oV; j < oU; j++ {
				g[j] += mlpL2 * p[j]
			}
			for j := oU; j < oB; j++ {
				g[j] += l2Hashed * p[j]
			}
			t++
			c1, c2 := 1-math.Pow(b1, float64(t)), 1-math.Pow(b2, float64(t))
			for j := range g {
				mw[j] = b1*mw[j] + (1-b1)*g[j]
				vw[j] = b2*vw[j] + (1-b2)*g[j]*g[j]
				p[j] -= mlpLR * (mw[j] / c1) / (math.Sqrt(vw[j]/c2) + 1e-8)
			}
		}
	}
	m := &logistic{u: slices.Clone(p[oU:oB]), b: p[oB], hw: make([]float64, oC), hb: slices.Clone(p[oC:oV]), ho: slices.Clone(p[oV:oU])}
	for k := range units {
		for j := range dim {
			m.hw[k*dim+j] = p[k*dim+j] / sd[j]
			m.hb[k] -= p[k*dim+j] * mu[j] / sd[j]
		}
	}
	return m
}

// standardize returns the inputs centred and scaled per dimension, with
// the means and standard deviations used.
func standardize(ins []instance) (xs [][]float64, mu, sd []float64) {
	dim := len(ins[0].x)
	mu, sd = make([]float64, dim), make([]float64, dim)
	for _, in := range ins {
		for j, v := range in.x {
			mu[j] += float64(v)
		}
	}
	for j := range mu {
		mu[j] /= float64(len(ins))
	}
	for _, in := range ins {
		for j, v := range in.x {
			d := float64(v) - mu[j]
			sd[j] += d * d
		}
	}
	for j := range sd {
		sd[j] = math.Sqrt(sd[j]/float64(len(ins))) + 1e-3
	}
	xs = make([][]float64, len(ins))
	for i, in := range ins {
		xs[i] = make([]float64, dim)
		for j, v := range in.x {
			xs[i][j] = (float64(v) - mu[j]) / sd[j]
		}
	}
	return xs, mu, sd
}

// fitLogistic trains an L2-regularised logistic regression with full-batch
// Adam, class-balanced, on standardised inputs (so that one penalty suits
// embedding dimensions and binary features alike); the standardisation is
// folded back into the weights. Deterministic: no sampling, fixed iteration
// count.
func fitLogistic(ins []instance, ys []bool) *logistic {
	xs, mu, sd := standardize(ins)
	dim, nh := len(mu), 1<<hashBits
	npos, nneg := classCounts(ys)
	wpos, wneg := posWeight/max(npos, 1), (1-posWeight)/max(nneg, 1)
	const (
		lr     = 0.02
		b1, b2 = 0.9, 0.999
	)
	// Parameters: dim dense weights, nh hashed weights, the bias.
	w := make([]float64, dim+nh)
	var b float64
	mw, vw := make([]float64, dim+nh+1), make([]float64, dim+nh+1)
	g := make([]float64, dim+nh+1)
	for t := 1; t <= epochs; t++ {
		clear(g)
		for i, x := range xs {
			z := b
			for j, v := range x {
				z += w[j] * v
			}
			for _, h := range ins[i].grams {
				z += w[dim+h]
			}
			p := 1 / (1 + math.Exp(-z))
			wt, y := wneg, 0.0
			if ys[i] {
				wt, y = wpos, 1
			}
			e := wt * (p - y)
			for j, v := range x {
				g[j] += e * v
			}
			for _, h := range ins[i].grams {
				g[dim+h] += e
			}
			g[dim+nh] += e
		}
		for j := 0; j < dim; j++ {
			if attnFrom > 0 && j >= attnFrom {
				g[j] += l2Dense * attnL2Factor * w[j]
			} else {
				g[j] += l2Dense * w[j]
			}
		}
		for j := dim; j < dim+nh; j++ {
			g[j] += l2Hashed * w[j]
		}
		c1, c2 := 1-math.Pow(b1, float64(t)), 1-math.Pow(b2, float64(t))
		for j := range g {
			mw[j] = b1*mw[j] + (1-b1)*g[j]
			vw[j] = b2*vw[j] + (1-b2)*g[j]*g[j]
			step := lr * (mw[j] / c1) / (math.Sqrt(vw[j]/c2) + 1e-8)
			if j == dim+nh {
				b -= step
			} else {
				w[j] -= step
			}
		}
	}
	m := &logistic{w: make([]float64, dim), u: slices.Clone(w[dim:]), b: b}
	for j := range dim {
		m.w[j] = w[j] / sd[j]
		m.b -= w[j] * mu[j] / sd[j]
	}
	return m
}

// train fits a model on the documents in idx: negatives are every part of a
// clean document; positives are the parts of an output's injected
// instruction, or, for a malicious definition, its whole text and (after a
// first fit) its highest-scoring part (multiple-instance learning).
func train(f *featurized, docs []doc, idx []int) *logistic {
	var xs []instance
	var ys []bool
	base := func() {
		xs, ys = xs[:0], ys[:0]
		for _, i := range idx {
			if !docs[i].malicious {
				for _, in := range f.parts[i] {
					xs, ys = append(xs, in), append(ys, false)
				}
			}
		}
	}
	first := func() {
		base()
		for _, i := range idx {
			if !docs[i].malicious {
				continue
			}
			switch {
			case len(f.attack[i]) > 0:
				for _, in := range f.attack[i] {
					xs, ys = append(xs, in), append(ys, true)
				}
			case f.whole[i] >= 0:
				xs, ys = append(xs, f.parts[i][f.whole[i]]), append(ys, true)
			default:
				for _, in := range f.parts[i] {
					xs, ys = append(xs, in), append(ys, true)
				}
			}
		}
	}
	first()
	var att tokenPooler
	if f.tokens > 0 {
		switch {
		case tuneRank > 0 && sharedTune != nil:
			att = sharedTune
			f = sharedTune.extend(f, idx)
		case tuneRank > 0:
			// The adapters learn from the task's texts; the thousands of
			// parts of easy extra negatives (godoc) would double the
			// cost and teach them little. The classifier still sees them.
			var txs []instance
			var tys []bool
			for i, in := range xs {
				if !auxNegative[docs[in.doc].source] {
					txs, tys = append(txs, in), append(tys, ys[i])
				}
			}
			t := fitTune(txs, tys, f.tokens)
			att = t
			f = t.extend(f, idx)
		case convFilters > 0:
			c := fitConv(xs, ys, f.tokens)
			att = c
			f = c.extend(f, idx)
		default:
			a := fitAttention(xs, ys, f.tokens)
			att = a
			f = a.extend(f, idx)
		}
		attnFrom = len(xs[0].x)
		defer func() { attnFrom = 0 }()
		first()
	}
	m := fit(xs, ys)
	// Second round: each malicious definition contributes its whole text and
	// the part the first model finds worst.
	base()
	if hardNeg > 0 {
		// A text is judged by its worst part, so the worst part of each
		// clean text is what the threshold meets: it weighs hardNeg times
		// more.
		for _, i := range idx {
			if docs[i].malicious || len(f.parts[i]) < 2 {
				continue
			}
			best, bs := -1, -1.0
			for j, in := range f.parts[i] {
				if s := m.score(in); s > bs {
					best, bs = j, s
				}
			}
			for range hardNeg {
				xs, ys = append(xs, f.parts[i][best]), append(ys, false)
			}
		}
	}
	for _, i := range idx {
		if !docs[i].malicious {
			continue
		}
		if len(f.attack[i]) > 0 {
			for _, in := range f.attack[i] {
				xs, ys = append(xs, in), append(ys, true)
			}
			continue
		}
		best, bs := -1, -1.0
		for j, in := range f.parts[i] {
			if s := m.score(in); s > bs {
				best, bs = j, s
			}
		}
		if milWhole && f.whole[i] >= 0 && f.whole[i] != best {
			xs, ys = append(xs, f.parts[i][f.whole[i]]), append(ys, true)
		}
		if best >= 0 {
			xs, ys = append(xs, f.parts[i][best]), append(ys, true)
		}
	}
	m = fit(xs, ys)
	m.att = att
	return m
}

// docScore is a document's worst part.
func docScore(m *logistic, f *featurized, i int) float64 {
	s := 0.0
	for j, in := range f.parts[i] {
		if m.att != nil {
			in = m.att.extendOne(in)
		}
		p := m.score(in)
		if f.mix != nil {
			p = 1 / (1 + math.Exp(-((1-f.share)*math.Log(p/(1-p)) + f.share*f.mix[i][j])))
		}
		s = max(s, p)
	}
	return s
}

// outputDefinitionShare is the definition model's share of an output
// part's logit (flag -output-definition-share; poison.Models). A quarter
// was chosen on authored58-73 with the ninth stop's weights, which had
// trained on neither: mean AUC of attacked outputs 0.926 -> 0.940 and
// 0.939 -> 0.954, recall at 2% FPR 0.51 -> 0.61 and 0.55 -> 0.67; shares
// of 0.2 and 0.3 did about as well, 0.5 worse (bench/poisoning/DATA.md).
var outputDefinitionShare = 0.25

// definitionLogits gives the definition model's logit of every part of
// every output document, as the detector computes it (same parts, vectors,
// pooled token vectors, features and n-grams), for the output threshold
// to be chosen on the mixed scores. Token vectors are computed here and not
// kept: those of every output part do not fit in memory.
func (l *learned) definitionLogits(def *poison.LinearModel) ([][]float64, error) {
	if l.mixFor == def {
		return l.mix, nil
	}
	logit := map[string]float64{}
	var todo []string
	parts := make([][]string, len(l.outs))
	for i, d := range l.outs {
		parts[i] = poison.Parts(scored(d.text))
		for _, p := range parts[i] {
			if _, ok := logit[p]; !ok {
				logit[p] = 0
				todo = append(todo, p)
			}
		}
	}
	start := time.Now()
	for lo := 0; lo < len(todo); lo += 64 {
		batch := todo[lo:min(lo+64, len(todo))]
		var vecs, toks [][]float32
		var err error
		if a := def.Attention; a != nil {
			vecs, toks, err = l.emb.m.Encode(context.Background(), batch, pooling, a.Layers...)
		} else {
			vecs, err = l.emb.Embed(context.Background(), batch)
		}
		if err != nil {
			return nil, err
		}
		for j, p := range batch {
			var pooled []float32
			if toks != nil {
				pooled = def.Attention.Pool(toks[j])
			}
			logit[p] = def.Logit(vecs[j], poison.Features(p), pooled, poison.Ngrams(p, hashBits))
		}
	}
	out := make([][]float64, len(l.outs))
	for i, d := range l.outs {
		if len(parts[i]) != len(l.outF.parts[i]) {
			return nil, fmt.Errorf("definitionLogits: output %s has %d parts and %d instances", d.id, len(parts[i]), len(l.outF.parts[i]))
		}
		out[i] = make([]float64, len(parts[i]))
		for j, p := range parts[i] {
			out[i][j] = logit[p]
		}
	}
	fmt.Printf("scored %d distinct output parts with the definition model in %v\n", len(todo), time.Since(start).Round(time.Second))
	l.mix, l.mixFor = out, def
	return out, nil
}

// fprBudget is what a threshold may flag of the clean training documents,
// out of fold, in two populations: real is the share of the development
// sets' and the real tools' clean texts (what the gateway scans), hard the
// share of the authored benign rows (written to be hard: honest security
// tools, guardrails, articles quoting injections). The threshold is the
// lowest that keeps both. One pooled budget could not tell them apart: the
// hard rows are nine in ten of the clean texts, so they alone set it.
type fprBudget struct{ real, hard float64 }

// defBudget and outBudget are the definition and output thresholds'
// budgets (flags -target-fpr, -hard-fpr, -target-fpr-outputs,
// -hard-fpr-outputs). Real: half the 0.02, a margin for texts
// unlike the training ones. Hard: new writers' hard rows are flagged about
// 1.5 times as often as out of fold (folds are by row, so a writer's other
// rows are in training). Definitions keep 0.02 there: at 0.05 (threshold
// 0.859) a model trained without any real tool flagged 0.027 of the 707
// real tools, over the budget, although real tools out of fold by
// server stayed at 0.008. Outputs take 0.05: a model trained without BIPIA
// flagged none of its clean outputs at the lower threshold.
var defBudget, outBudget = fprBudget{real: 0.01, hard: 0.02}, fprBudget{real: 0.01, hard: 0.05}

// The L2 penalties of the dense (embedding and structural, standardised)
// and hashed n-gram weights.
var l2Dense, l2Hashed = 3e-2, 3e-2

// epochs of full-batch Adam, and the share of the loss carried by the
// positive instances (0.5: classes balanced).
var (
	// milWhole keeps a malicious definition's whole text as a positive in
	// the second round, next to its worst part.
	milWhole  = true
	epochs    = 150
	posWeight = 0.5
	// hardNeg is how many more times the worst part of a clean text of
	// several parts counts as a negative in the second round (flag
	// -hard-neg).
	hardNeg = 0
)

// fitWithThreshold trains on idx and picks the threshold from 5-fold
// out-of-fold scores within idx: the lowest threshold at which at most
// target of the clean training documents are flagged. No document outside
// idx is looked at.
func fitWithThreshold(f *featurized, docs []doc, idx []int, budget fprBudget) (*logistic, float64) {
	const k = 5
	var clean, realClean, hardClean, bad []float64
	oof := map[int]float64{}
	type sc struct {
		s  float64
		id string
	}
	var top []sc
	for fold := 0; fold < k; fold++ {
		var tr, te []int
		for _, i := range idx {
			if foldOf(docs[i].group, k) == fold {
				te = append(te, i)
			} else {
				tr = append(tr, i)
			}
		}
		m := train(f, docs, tr)
		for _, i := range te {
			oof[i] = docScore(m, f, i)
			if auxNegative[docs[i].source] {
				// Easy extra negatives would let the threshold drop: the
				// target FPR is a share of the clean documents that are
				// like what the detector scans.
				continue
			}
			if !docs[i].malicious {
				clean = append(clean, docScore(m, f, i))
				if strings.HasPrefix(docs[i].source, "authored") {
					hardClean = append(hardClean, clean[len(clean)-1])
				} else {
					realClean = append(realClean, clean[len(clean)-1])
				}
				top = append(top, sc{clean[len(clean)-1], docs[i].id + " " + clip(docs[i].text, 80)})
			} else {
				bad = append(bad, docScore(m, f, i))
			}
		}
	}
	th := max(budgetThreshold(realClean, budget.real), budgetThreshold(hardClean, budget.hard))
	if debugThresholds {
		slices.SortFunc(top, func(a, b sc) int { return cmp.Compare(b.s, a.s) })
		for _, t := range top[:min(8, len(top))] {
			fmt.Printf("    clean oof %.3f %s\n", t.s, t.id)
		}
		for _, q := range []float64{0.5, 0.8, 0.9, 0.95, 0.99} {
			n := 0
			for _, b := range bad {
				if b >= q {
					n++
				}
			}
			m := 0
			for _, c := range clean {
				if c >= q {
					m++
				}
			}
			fmt.Printf("    oof at %.2f: recall %d/%d, clean flagged %d/%d\n", q, n, len(bad), m, len(clean))
		}
	}
	if printOOF {
		// Per source, at the chosen threshold: the out-of-fold figures
		// (folds by group, e.g. by server for the real tools), an estimate
		// for unseen rows of sources that are in training.
		bySrc := map[string]*[4]int{} // tp, fn, fp, tn
		for _, i := range idx {
			c := bySrc[docs[i].source]
			if c == nil {
				c = &[4]int{}
				bySrc[docs[i].source] = c
			}
			hit := oof[i] >= th
			switch {
			case docs[i].malicious && hit:
				c[0]++
			case docs[i].malicious:
				c[1]++
			case hit:
				c[2]++
			default:
				c[3]++
			}
		}
		for _, src := range slices.Sorted(maps.Keys(bySrc)) {
			c := bySrc[src]
			fmt.Printf("  out of fold at threshold %.3f, %-38s recall %s (%d of %d)  FPR %s (%d of %d)\n", th, src, ratio(c[0], c[0]+c[1]), c[0], c[0]+c[1], ratio(c[2], c[2]+c[3]), c[2], c[2]+c[3])
		}
		if oofScores != nil {
			for _, i := range idx {
				fmt.Fprintf(oofScores, "%.4f\t%s\t%s\t%t\t%.6f\n", th, docs[i].id, docs[i].source, docs[i].malicious, oof[i])
			}
		}
		if won, n := pairOrder(docs, idx, oof); n > 0 {
			// Threshold-free: a model that reads intent ranks each attack
			// above its benign twin; one that reads the register, half.
			fmt.Printf("  out of fold, minimal pairs: the attack scores above its benign twin in %d of %d (%s)\n", won, n, ratio(won, n))
		}
	}
	return train(f, docs, idx), th
}

// budgetThreshold is the lowest threshold (at least 0.5) at which at most
// the share target of the scores is flagged.
func budgetThreshold(scores []float64, target float64) float64 {
	s := slices.Clone(scores)
	slices.Sort(s)
	slices.Reverse(s)
	allowed := int(target * float64(len(s)))
	if allowed >= len(s) {
		return 0.5
	}
	return max(0.5, math.Nextafter(s[allowed], 2))
}

// dropFeatures are structural features held at zero in training (flag
// -drop-features), to measure what a feature is worth.
var dropFeatures []string

// outputOnlyFeatures are held at zero in the definition model, so its
// weights for them are zero: they speak of the reader of a document and of
// the user in the third person, which honest tool descriptions do as a
// matter of course (leave-one-source-out with them in the definition model:
// real-tool FPR 0.010 -> 0.015, recall lower on two of four authored folds).
var outputOnlyFeatures = []string{"addresses_reader", "user_third_person"}

// outputOnlyViews are the embedding views (embed.Pooling.Views) held at
// zero in the definition model. The maximum over a text's tokens helped
// every output fold and cost the definition model real-tool FPR (leave
// the catalogue out: 0.009 with the mean and third-layer views, 0.040 with
// the maximum too).
var outputOnlyViews = []string{"max"}

// droppedViewsNote says, for the weights' trained note, which views of the
// pooling the definition model does not read.
func droppedViewsNote() string {
	var dropped []string
	for _, v := range pooling.Views() {
		if slices.Contains(outputOnlyViews, v) {
			dropped = append(dropped, v)
		}
	}
	if len(dropped) == 0 {
		return ""
	}
	return fmt.Sprintf(" (the definition model's weights on the %s view held at zero)", strings.Join(dropped, ", "))
}

// auxNegative are sources of extra benign training text that do not count
// in the threshold's clean-document FPR.
var auxNegative = map[string]bool{"godoc": true}

// pairOrder counts, among the documents idx that form minimal pairs (a
// group of one malicious and one benign document), those whose malicious
// document scores above its twin.
func pairOrder(docs []doc, idx []int, score map[int]float64) (won, n int) {
	byGroup := map[string][]int{}
	for _, i := range idx {
		byGroup[docs[i].group] = append(byGroup[docs[i].group], i)
	}
	for _, g := range byGroup {
		if len(g) != 2 || docs[g[0]].malicious == docs[g[1]].malicious {
			continue
		}
		m, b := g[0], g[1]
		if docs[b].malicious {
			m, b = b, m
		}
		n++
		if score[m] > score[b] {
			won++
		}
	}
	return won, n
}

// separation measures how well scores separate the malicious documents of
// idx from the clean ones, without a threshold chosen elsewhere: the area
// under the ROC curve (ties count half), and the recall at the highest
// threshold whose FPR among these clean documents is at most fpr. It
// compares representations; the thresholds a model ships with are chosen
// on its training data.
func separation(docs []doc, idx []int, score map[int]float64, fpr float64) (auc, recall float64, ok bool) {
	var pos, neg []float64
	for _, i := range idx {
		if docs[i].malicious {
			pos = append(pos, score[i])
		} else {
			neg = append(neg, score[i])
		}
	}
	if len(pos) == 0 || len(neg) == 0 {
		return 0, 0, false
	}
	var wins float64
	for _, p := range pos {
		for _, n := range neg {
			switch {
			case p > n:
				wins++
			case p == n:
				wins += 0.5
			}
		}
	}
	slices.Sort(neg)
	// Flag scores above the (allowed+1)-th highest clean score.
	allowed := int(fpr * float64(len(neg)))
	th := neg[len(neg)-1-allowed]
	hits := 0
	for _, p := range pos {
		if p > th {
			hits++
		}
	}
	return wins / float64(len(pos)*len(neg)), float64(hits) / float64(len(pos)), true
}

// printOOF prints the out-of-fold figures per source when training the
// shipped weights.
var printOOF bool

// oofScores, when set (flag -oof-scores), receives one line per training
// document of each model trained with printOOF: the model's threshold, the
// document's id, source, label and out-of-fold score, so that other
// thresholds can be weighed without training again.
var oofScores io.Writer

var debugThresholds = os.Getenv("POISON_DEBUG") != ""

func foldOf(group string, k int) int {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() % uint32(k))
}

func (m *logistic) export(th float64) *poison.LinearModel {
	lm := &poison.LinearModel{Weights: make([]float32, len(m.w)), Hashed: make([]float32, len(m.u)), Bias: float32(m.b), Threshold: th}
	// Four significant decimals keep the committed file small.
	r := func(x float64) float32 { return float32(math.Round(x*1e4) / 1e4) }
	for i, w := range m.w {
		lm.Weights[i] = float32(w)
	}
	for i, u := range m.u {
		lm.Hashed[i] = r(u)
	}
	if m.hw != nil {
		h := &poison.HiddenLayer{Units: len(m.hb), Weights: make([]float32, len(m.hw)), Bias: make([]float32, len(m.hb)), Out: make([]float32, len(m.ho))}
		for i, w := range m.hw {
			h.Weights[i] = r(w)
		}
		for i := range m.hb {
			h.Bias[i], h.Out[i] = r(m.hb[i]), r(m.ho[i])
		}
		lm.Hidden = h
		if len(m.w) == 0 {
			lm.Weights = []float32{}
		}
	}
	if a, ok := m.att.(*attention); ok {
		pa := &poison.Attention{Layers: attnLayers, Heads: a.heads, Mean: make([]float32, a.dim), Scale: make([]float32, a.dim), Query: make([]float32, len(a.q))}
		for j := range a.dim {
			pa.Mean[j], pa.Scale[j] = float32(a.mu[j]), float32(1/a.sd[j])
		}
		for j, q := range a.q {
			pa.Query[j] = float32(q)
		}
		lm.Attention = pa
	}
	return lm
}

// learned bundles what the training of both kinds needs.
type learned struct {
	emb      *cachedEmbedder
	defs     []doc
	outs     []doc
	defF     *featurized
	outF     *featurized
	gate     *gateData
	modelID  string
	features []string
	// mix are the definition logits of the output parts under mixFor
	// (definitionLogits).
	mix    [][]float64
	mixFor *poison.LinearModel
}

func prepare(emb *cachedEmbedder, defs, outs []doc) (*learned, error) {
	l := &learned{emb: emb, defs: defs, outs: outs, modelID: emb.ModelID(), features: poison.FeatureNames}
	var err error
	if l.defF, err = featurize(emb, defs, slices.Concat(dropFeatures, outputOnlyFeatures), outputOnlyViews); err != nil {
		return nil, err
	}
	if l.outF, err = featurize(emb, outs, dropFeatures, nil); err != nil {
		return nil, err
	}
	if tuneRank > 0 {
		tuneWeights = nil
		for l := tuneFrom(); l <= 6; l++ {
			w, err := emb.m.Layer(l)
			if err != nil {
				return nil, err
			}
			tuneWeights = append(tuneWeights, w)
		}
	}
	if attnHeads > 0 || convFilters > 0 || tuneRank > 0 {
		// Definitions only, unless -attn-outputs: on the output folds the
		// heads cost recall and false positives (bench/poisoning/DATA.md).
		tokens := newTokenStore(emb.m)
		err := tokens.attach(l.defF, defs)
		if err == nil && attnOutputs {
			err = tokens.attach(l.outF, outs)
		}
		tokens.save()
		if err != nil {
			return nil, err
		}
	}
	l.gate = gateFeaturize(outs)
	goNeg, err := goSourceNegatives()
	if err != nil {
		return nil, err
	}
	l.gate.extra = append(l.gate.extra, goNeg...)
	for _, d := range defs {
		if d.source == "catalogue" {
			for _, s := range poison.ScreenSentences(d.text) {
				if poison.ScreenWords(s) {
					l.gate.extra = append(l.gate.extra, instance{x: []float32{}, grams: poison.Ngrams(s, hashBits), doc: -1})
				}
			}
		}
	}
	emb.save()
	return l, nil
}

// models trains both kinds on the documents for which keep is true; with
// only set to "definitions" or "outputs" the other kind's model is the
// shipped one (leave-one-source-out needs one kind per fold).
func (l *learned) models(keep func(d doc) bool, note string, only ...string) *poison.Models {
	pick := func(docs []doc) []int {
		var idx []int
		for i, d := range docs {
			if keep(d) {
				idx = append(idx, i)
			}
		}
		return idx
	}
	m := &poison.Models{EmbedModel: l.modelID, Pooling: poolingName(), Dim: l.emb.Dim(), Features: l.features, HashBits: hashBits, Trained: note}
	if len(only) > 0 {
		// The other kind's model is the shipped one; when the features
		// changed since it was trained, the trained kind's model stands in
		// for it (a fold scans one kind only, so it is never used).
		if shipped, err := poison.BuiltinModels(); err == nil && shipped.Dim == m.Dim {
			m.Definition, m.Output, m.OutputGate = shipped.Definition, shipped.Output, shipped.OutputGate
			m.OutputDefinitionShare = shipped.OutputDefinitionShare
		}
	}
	if len(only) == 0 || only[0] == "definitions" {
		dm, dth := fitWithThreshold(l.defF, l.defs, pick(l.defs), defBudget)
		m.Definition = dm.export(dth)
	}
	if len(only) == 0 || only[0] == "outputs" {
		if !gateOnly {
			l.outF.mix, l.outF.share = nil, 0
			if outputDefinitionShare > 0 && m.Definition != nil {
				mix, err := l.definitionLogits(m.Definition)
				if err != nil {
					log.Fatal(err)
				}
				l.outF.mix, l.outF.share = mix, outputDefinitionShare
			}
			om, oth := fitWithThreshold(l.outF, l.outs, pick(l.outs), outBudget)
			m.Output = om.export(oth)
			m.OutputDefinitionShare = l.outF.share
		}
		gm, gth := fitGate(l.gate, l.outs, pick(l.outs))
		m.OutputGate = gm.export(gth)
	}
	if m.Definition == nil {
		m.Definition = m.Output
	}
	if m.Output == nil {
		m.Output = m.Definition
	}
	return m
}

func writeModels(path string, m *poison.Models) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

func sources(docs []doc) []string {
	var out []string
	for _, d := range docs {
		if !slices.Contains(out, d.source) {
			out = append(out, d.source)
		}
	}
	slices.Sort(out)
	return out
}

func fmtCounts(name string, c counts, th float64) string {
	s := fmt.Sprintf("%-40s %5d %5d %5d %5d  %9s %6s %6s", name, c.tp+c.fp+c.fn+c.tn, c.tp, c.fp, c.fn, ratio(c.tp, c.tp+c.fp), ratio(c.tp, c.tp+c.fn), ratio(c.fp, c.fp+c.tn))
	if th >= 0 {
		s += fmt.Sprintf("  threshold %.3f", th)
	}
	return s
}

// gateData holds, per output document, the hashed n-grams of each screen
// sentence (poison.ScreenSentences), and of each sentence of its injected
// instruction: what the output gate is trained and measured on.
type gateData struct {
	sents  [][]instance
	attack [][]instance
	// extra are more negatives: the sentences of the real tool
	// descriptions (benign prose of another register than the outputs).
	extra []instance
}

func gateFeaturize(docs []doc) *gateData {
	g := &gateData{sents: make([][]instance, len(docs)), attack: make([][]instance, len(docs))}
	grams := func(i int, text string) []instance {
		var out []instance
		for _, s := range poison.ScreenSentences(text) {
			if poison.ScreenWords(s) {
				out = append(out, instance{x: []float32{}, grams: poison.Ngrams(s, hashBits), doc: i})
			}
		}
		return out
	}
	for i, d := range docs {
		g.sents[i] = grams(i, d.text)
		if d.attack != "" {
			g.attack[i] = grams(i, d.attack)
		}
	}
	return g
}

// trainGate fits the lexical gate: positives are the sentences of injected
// instructions, negatives the sentences of clean documents.
func trainGate(g *gateData, docs []doc, idx []int) *logistic {
	// The gate has only the n-grams to go on: it gets its own, lighter
	// penalty so that instruction words can carry large weights.
	saved, savedPos := l2Hashed, posWeight
	l2Hashed, posWeight = l2Gate, gatePosWeight
	defer func() { l2Hashed, posWeight = saved, savedPos }()
	var xs []instance
	var ys []bool
	for _, i := range idx {
		if docs[i].malicious {
			for _, in := range g.attack[i] {
				xs, ys = append(xs, in), append(ys, true)
			}
			continue
		}
		for _, in := range g.sents[i] {
			xs, ys = append(xs, in), append(ys, false)
		}
	}
	for _, in := range g.extra {
		xs, ys = append(xs, in), append(ys, false)
	}
	return fitLogistic(xs, ys)
}

// gateRecall is the share of attacked documents the gate must pass, on
// out-of-fold scores of the training documents. The rules read every
// output whatever the gate says, so the gate only decides what the
// classifier embeds: at 0.8 it marks about 6% of clean outputs, and the
// detector's recall is the same as at 0.95 (which marks a third) within half
// a point (bench/poisoning/DATA.md).
var gateRecall = 0.8

// l2Gate is the L2 penalty of the gate's n-gram weights; gatePosWeight
// the share of its loss on positive sentences (below one half, so that the
// bias does not lift every short sentence it knows nothing about).
var l2Gate, gatePosWeight = 1e-3, 0.5

// gateOnly trains only the output gate (flag -gate-only), for tuning it.
var gateOnly bool

// fitGate trains the gate on idx and sets its threshold so that gateRecall
// of the attacked training documents (out of fold) have a sentence at or
// above it.
func fitGate(g *gateData, docs []doc, idx []int) (*logistic, float64) {
	const k = 5
	var bad, clean []float64
	docMax := func(m *logistic, i int) float64 {
		s := 0.0
		for _, in := range g.sents[i] {
			s = max(s, m.score(in))
		}
		return s
	}
	for fold := 0; fold < k; fold++ {
		var tr, te []int
		for _, i := range idx {
			if foldOf(docs[i].group, k) == fold {
				te = append(te, i)
			} else {
				tr = append(tr, i)
			}
		}
		m := trainGate(g, docs, tr)
		for _, i := range te {
			if docs[i].malicious {
				bad = append(bad, docMax(m, i))
			} else {
				clean = append(clean, docMax(m, i))
			}
		}
	}
	slices.Sort(bad)
	th := 0.5
	if len(bad) > 0 {
		th = bad[int((1-gateRecall)*float64(len(bad)))]
	}
	pass := 0
	for _, c := range clean {
		if c >= th {
			pass++
		}
	}
	fmt.Printf("  output gate: threshold %.4f passes %d of %d clean training outputs out of fold (%.3f)\n", th, pass, len(clean), float64(pass)/float64(max(len(clean), 1)))
	if debugThresholds {
		for _, r := range []float64{0.99, 0.97, 0.95, 0.9, 0.8} {
			t := bad[int((1-r)*float64(len(bad)))]
			n := 0
			for _, c := range clean {
				if c >= t {
					n++
				}
			}
			fmt.Printf("    gate at attacked-document recall %.2f: threshold %.4f, clean passed %d of %d\n", r, t, n, len(clean))
		}
	}
	return trainGate(g, docs, idx), th
}

// goSourceNegatives are more negatives for the output gate: the sentences
// of a few packages of the Go distribution's own source (code and its
// comments, what a file or code tool returns), read in file-name order from
// GOROOT, so that the gate does not mark code and API prose for want of
// having seen any. The toolchain is pinned by go.mod, so the text is fixed.
func goSourceNegatives() ([]instance, error) {
	var out []instance
	raw, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("gate negatives: go env GOROOT: %v", err)
	}
	root := strings.TrimSpace(string(raw))
	for _, pkg := range []string{"net/http", "encoding/json", "os", "strings", "text/template"} {
		files, _ := filepath.Glob(filepath.Join(root, "src", pkg, "*.go"))
		slices.Sort(files)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, s := range poison.ScreenSentences(string(raw)) {
				if poison.ScreenWords(s) {
					out = append(out, instance{x: []float32{}, grams: poison.Ngrams(s, hashBits), doc: -1})
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gate negatives: no Go source under %s/src", root)
	}
	return out, nil
}
