package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/poison"
)

// attnHeads is the number of learned attention poolings over the token
// vectors of layers attnLayers (flag -attn; 0: none). Each head is a query
// that weighs a part's tokens; the pooled vectors join the part's
// features. By default the committed weights' number, so that they are
// measured and retrained as they were trained.
var attnHeads = func() int {
	if m, err := poison.BuiltinModels(); err == nil && m.Definition.Attention != nil {
		return m.Definition.Attention.Heads
	}
	return 0
}()

// attentionNote says, for the weights' trained note, how the heads were
// trained.
func attentionNote() string {
	if attnHeads == 0 {
		return ""
	}
	return fmt.Sprintf(" + (definitions) %d learned attention poolings over the token vectors of layers %v (standardised; queries trained first, per fit, by a model reading only the pooled vectors: %d epochs of mini-batch Adam, batch %d, lr %g, L2 %g, seeded; the pooled vectors' L2 in the classifier %g times the others')", attnHeads, attnLayers, attnEpochs, attnBatch, attnLR, attnL2, attnL2Factor)
}

// attnLayers are the layers whose token vectors the heads read (flag
// -attn-layers; by default the committed weights'). The third layer's, as
// for the mid view: with the last layer's too the heads cost real-tool FPR
// (bench/poisoning/DATA.md).
var attnLayers = func() []int {
	if m, err := poison.BuiltinModels(); err == nil && m.Definition.Attention != nil {
		return m.Definition.Attention.Layers
	}
	return []int{3}
}()

// tokenStore holds the token vectors of every part, in bfloat16 (the top
// half of a float32: enough for pooling, half the memory), cached on disk.
type tokenStore struct {
	m     *embed.MiniLM
	path  string
	rows  map[[32]byte][]uint16
	dirty bool
}

func newTokenStore(m *embed.MiniLM) *tokenStore {
	s := &tokenStore{m: m, rows: map[[32]byte][]uint16{}}
	if cd, err := os.UserCacheDir(); err == nil {
		id := strings.NewReplacer("/", "_", "@", "_", "+", "_").Replace(m.ModelID())
		s.path = filepath.Join(cd, "toolgate", fmt.Sprintf("bench-poisoning-tokens-%s-layers%s.bin", id, strings.ReplaceAll(layersFlag(), ",", "_")))
		s.load()
	}
	return s
}

// attach gives every part of f (documents docs) its token vectors.
func (s *tokenStore) attach(f *featurized, docs []doc) error {
	for i, d := range docs {
		for _, set := range []struct {
			ins  []instance
			text string
		}{{f.parts[i], d.text}, {f.attack[i], d.attack}} {
			if len(set.ins) == 0 {
				continue
			}
			parts := poison.Parts(scored(set.text))
			if len(parts) != len(set.ins) {
				return fmt.Errorf("attach: document %s has %d parts and %d instances", d.id, len(parts), len(set.ins))
			}
			toks, err := s.get(parts)
			if err != nil {
				return err
			}
			for j := range set.ins {
				set.ins[j].tok = toks[j]
			}
		}
	}
	f.tokens = len(attnLayers) * s.m.Dim()
	return nil
}

func bf16(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func unbf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// get returns the token rows of each text, computing the missing ones.
func (s *tokenStore) get(texts []string) ([][]uint16, error) {
	out, added, err := cached(s.rows, texts, func(miss []string) ([][]uint16, error) {
		_, toks, err := s.m.Encode(context.Background(), miss, embed.PoolMean, attnLayers...)
		if err != nil {
			return nil, err
		}
		rows := make([][]uint16, len(toks))
		for j, t := range toks {
			rows[j] = make([]uint16, len(t))
			for k, v := range t {
				rows[j][k] = bf16(v)
			}
		}
		return rows, nil
	})
	s.dirty = s.dirty || added
	return out, err
}

func (s *tokenStore) load() {
	f, err := os.Open(s.path)
	if err != nil {
		return
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var key [32]byte
	var n uint32
	for {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return
		}
		if binary.Read(r, binary.LittleEndian, &n) != nil {
			return
		}
		row := make([]uint16, n)
		if binary.Read(r, binary.LittleEndian, row) != nil {
			return
		}
		s.rows[key] = row
	}
}

func (s *tokenStore) save() {
	if !s.dirty || s.path == "" {
		return
	}
	_ = os.MkdirAll(filepath.Dir(s.path), 0o755)
	// A temporary file of its own: two bench runs may save at once.
	f, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	for k, row := range s.rows {
		w.Write(k[:])
		binary.Write(w, binary.LittleEndian, uint32(len(row)))
		binary.Write(w, binary.LittleEndian, row)
	}
	werr := w.Flush()
	if cerr := f.Close(); werr == nil && cerr == nil {
		_ = os.Rename(tmp, s.path)
	}
	_ = os.Remove(tmp)
}

// attention is a set of learned poolings over standardised token vectors:
// head k weighs token t by softmax_t(q_k·h_t) and reads out v_k·(weighted
// mean). Only the pooled vectors are used downstream (as features).
type attention struct {
	heads, dim int
	mu, sd     []float64
	q, v       []float64 // heads × dim
	b          float64
}

// standardized decodes a part's token rows, standardised.
func (a *attention) standardized(tok []uint16) [][]float64 {
	return standardRows[float64](tok, a.mu, a.sd)
}

// weights is head k's softmax over the tokens h.
func (a *attention) weights(k int, h [][]float64) []float64 {
	q := a.q[k*a.dim : (k+1)*a.dim]
	w := make([]float64, len(h))
	mx := math.Inf(-1)
	for t, row := range h {
		s := 0.0
		for j, v := range row {
			s += q[j] * v
		}
		w[t] = s
		mx = max(mx, s)
	}
	var sum float64
	for t := range w {
		w[t] = math.Exp(w[t] - mx)
		sum += w[t]
	}
	for t := range w {
		w[t] /= sum
	}
	return w
}

// pool returns the heads' pooled vectors of a part, side by side.
func (a *attention) pool(tok []uint16) []float32 {
	out := make([]float32, a.heads*a.dim)
	if len(tok) == 0 {
		return out
	}
	_, ps := a.pooled(a.standardized(tok))
	for k, p := range ps {
		for j, v := range p {
			out[k*a.dim+j] = float32(v)
		}
	}
	return out
}

// pooled returns each head's token weights and weighted mean of h.
func (a *attention) pooled(h [][]float64) (ws, ps [][]float64) {
	ws, ps = make([][]float64, a.heads), make([][]float64, a.heads)
	for k := range a.heads {
		ws[k] = a.weights(k, h)
		p := make([]float64, a.dim)
		for t, row := range h {
			for j, v := range row {
				p[j] += ws[k][t] * v
			}
		}
		ps[k] = p
	}
	return ws, ps
}

// Stage-one training: epochs of mini-batch Adam.
var (
	attnEpochs = 6
	attnBatch  = 32
	attnLR     = 0.003
	attnL2     = 1e-3
)

// fitAttention learns the heads on the parts ins (labels ys) with a model
// that reads only the pooled vectors: z = b + Σ_k v_k·pool_k. Token rows
// are dim wide.
func fitAttention(ins []instance, ys []bool, dim int) *attention {
	a := &attention{heads: attnHeads, dim: dim, q: make([]float64, attnHeads*dim), v: make([]float64, attnHeads*dim)}
	a.mu, a.sd = tokenMoments(ins, dim)
	// Small random queries break the heads' symmetry; zero queries would
	// start every head as the plain mean.
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range a.q {
		a.q[i] = rng.NormFloat64() * 0.01
		a.v[i] = rng.NormFloat64() * 0.01
	}
	wpos, wneg := classWeights(ys)
	nq := len(a.q)
	g := make([]float64, 2*nq+1)
	opt := &adam{lr: attnLR, l2: attnL2}
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	for range attnEpochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for lo := 0; lo < len(order); lo += attnBatch {
			hi := min(lo+attnBatch, len(order))
			clear(g)
			for _, i := range order[lo:hi] {
				wt := wneg
				if ys[i] {
					wt = wpos
				}
				a.grad(ins[i].tok, ys[i], wt, g)
			}
			bs := float64(hi - lo)
			opt.step++
			opt.update(0, nil, a.q, g[:nq], bs, true)
			opt.update(1, nil, a.v, g[nq:2*nq], bs, true)
			opt.scalar(2, &a.b, g[2*nq:], bs)
		}
	}
	return a
}

// param is the j-th trained parameter: the queries, the readouts, the bias.
func (a *attention) param(j int) *float64 {
	switch {
	case j < len(a.q):
		return &a.q[j]
	case j < 2*len(a.q):
		return &a.v[j-len(a.q)]
	}
	return &a.b
}

// logit is the stage-one model's logit for a part's token rows.
func (a *attention) logit(tok []uint16) float64 {
	_, ps := a.pooled(a.standardized(tok))
	return a.readout(ps)
}

func (a *attention) readout(ps [][]float64) float64 {
	z := a.b
	for k, p := range ps {
		for j, v := range p {
			z += a.v[k*a.dim+j] * v
		}
	}
	return z
}

// grad adds to g (ordered as param) the gradient of the weighted logistic
// loss of one part with label y. With s_t = q·h_t, a = softmax(s) and
// r_t = v·h_t, the logit is Σ_t a_t r_t per head, whose derivative in s_t
// is a_t (r_t − Σ_u a_u r_u).
func (a *attention) grad(tok []uint16, y bool, wt float64, g []float64) {
	if len(tok) == 0 {
		return
	}
	h := a.standardized(tok)
	dim := a.dim
	ws, ps := a.pooled(h)
	z := a.readout(ps)
	yy := 0.0
	if y {
		yy = 1
	}
	e := wt * (1/(1+math.Exp(-z)) - yy)
	for k := range a.heads {
		vk := a.v[k*dim : (k+1)*dim]
		gq, gv := g[k*dim:(k+1)*dim], g[len(a.q)+k*dim:len(a.q)+(k+1)*dim]
		zk := 0.0
		for j, v := range ps[k] {
			gv[j] += e * v
			zk += vk[j] * v
		}
		for t, row := range h {
			r := 0.0
			for j, v := range row {
				r += vk[j] * v
			}
			c := e * ws[k][t] * (r - zk)
			for j, v := range row {
				gq[j] += c * v
			}
		}
	}
	g[len(g)-1] += e
}

func (a *attention) extend(f *featurized, idx []int) *featurized {
	return extendWith(a, f, idx)
}

func (a *attention) extendOne(in instance) instance {
	p := a.pool(in.tok)
	if attnScalar {
		// Each head's stage-one readout alone.
		z := make([]float32, a.heads)
		for k := range a.heads {
			var d float64
			for j, v := range p[k*a.dim : (k+1)*a.dim] {
				d += a.v[k*a.dim+j] * float64(v)
			}
			z[k] = float32(d)
		}
		p = z
	}
	return withFeatures(in, p)
}

// attnFrom is the first feature the heads add while a model with them is
// fitted; their L2 penalty is attnL2Factor times the other features'
// (flag -attn-l2-factor).
var (
	attnFrom     int
	attnL2Factor = 10.0
)

// attnOutputs gives the output model the heads too (flag -attn-outputs;
// an experiment: they lost on the output folds).
var attnOutputs bool

// attnScalar passes each head's stage-one readout to the classifier
// instead of its pooled vector (flag -attn-scalar).
var attnScalar bool

// losoClassifier is leave-one-source-out of the classifier alone, each
// held-out document scored by its worst part in the bench.
func losoClassifier(l *learned, verbose bool) {
	for _, kind := range losoKinds {
		docs, f, target := l.defs, l.defF, defBudget
		if kind == "outputs" {
			docs, f, target = l.outs, l.outF, outBudget
		}
		// Every fold's held-out scores together: what one threshold would
		// meet on a mix of writers none of the models saw. Sources of one
		// class only (real tools, godoc) stay out of the pool.
		var pooled []int
		var pooledAt counts
		pooledScore := map[int]float64{}
		for _, src := range sources(docs) {
			if losoSources != nil && !slices.Contains(losoSources, src) {
				continue
			}
			var idx []int
			for i, d := range docs {
				if d.source != src && !(src == "catalogue" && catalogueDerived[d.source]) {
					idx = append(idx, i)
				}
			}
			start := time.Now()
			if tuneRank > 0 && tuneShared {
				sharedTune = train(f, docs, idx).att.(*tuned)
			}
			m, th := fitWithThreshold(f, docs, idx, target)
			sharedTune = nil
			var c counts
			var held []int
			score := map[int]float64{}
			for i, d := range docs {
				if d.source == src {
					held = append(held, i)
					score[i] = docScore(m, f, i)
					hit := score[i] >= th
					c.add(d.malicious, hit)
					if verbose && hit != d.malicious {
						fmt.Printf("  %s %s %q\n", map[bool]string{true: "MISS", false: "FALSE POSITIVE"}[d.malicious], d.id, clip(d.text, 150))
					}
				}
			}
			note := ""
			if tuneRank > 0 && tuneShared {
				note = " (-tune-shared: the threshold is chosen on texts the adapters learned from, and comes out low)"
			}
			fmt.Println(fmtCounts(kind+": "+src, c, th), time.Since(start).Round(time.Second), note)
			if kind == "definitions" {
				// The classifier alone at other thresholds (the menu -blind
				// prints with the rules).
				var menu []string
				for _, t := range menuThresholds {
					var at counts
					for _, i := range held {
						at.add(docs[i].malicious, score[i] >= t)
					}
					menu = append(menu, fmt.Sprintf("T %.3f: %d/%d attacks, %d/%d clean", t, at.tp, at.tp+at.fn, at.fp, at.fp+at.tn))
				}
				fmt.Printf("  at other thresholds: %s\n", strings.Join(menu, "; "))
			}
			if auc, rec, ok := separation(docs, held, score, 0.02); ok {
				fmt.Printf("  threshold-free: AUC %.3f; recall %.3f at the source's own 2%% FPR\n", auc, rec)
				pooled = append(pooled, held...)
				maps.Copy(pooledScore, score)
				pooledAt.merge(c)
			}
			if won, n := pairOrder(docs, held, score); n > 0 {
				fmt.Printf("  minimal pairs: the attack scores above its benign twin in %d of %d\n", won, n)
			}
		}
		if auc, rec, ok := separation(docs, pooled, pooledScore, 0.02); ok && len(pooled) > 0 {
			fmt.Println(fmtCounts(kind+": pooled held-out sources", pooledAt, -1), "(each at its fold's threshold)")
			fmt.Printf("  threshold-free, pooled: AUC %.3f; recall %.3f at 2%% FPR of the pooled clean documents\n", auc, rec)
		}
	}
}

// layersFlag writes attnLayers as -attn-layers reads them.
func layersFlag() string {
	return strings.Trim(strings.ReplaceAll(fmt.Sprint(attnLayers), " ", ","), "[]")
}
