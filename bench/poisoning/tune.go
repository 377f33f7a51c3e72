package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
)

// tuneRank is the rank of low-rank adapters (LoRA) on MiniLM's top layers
// (-tune-layers), trained through the pooled sentence vector on the
// classifier's task (flag -tune; 0: none). The frozen features read intent
// only as a small shift (bench/poisoning/DATA.md, minimal pairs); adapters
// let the top layers' attention and feed-forward blocks re-weigh what the
// layers below found. The adapted layers read the token vectors of the
// layer below them (cached, bfloat16), so training never runs the lower
// layers. An experiment for -attn-loso: the runtime has no adapters.
var (
	tuneRank    = 0
	tuneTargets = "q,v,o,ff1,ff2"
	tuneEpochs  = 4
	tuneBatch   = 32
	tuneLR      = 1e-3
	tuneL2      = 1e-4
)

// tuneLayers is how many of MiniLM's top layers the adapters sit on (flag
// -tune-layers); they read the token vectors of the layer below, cached.
var tuneLayers = 1

// tuneFrom is the first adapted layer (1-based); MiniLM has six.
func tuneFrom() int { return 7 - tuneLayers }

// adapter is a LoRA pair on a dense map from in to out features: the map's
// output gains B·(A·x), with A r×in and B out×r. B starts at zero, so
// the adapted layer starts as the frozen one. The rank is padded to a
// multiple of 16 with zero rows of A (their gradients stay zero), so that
// every product runs on embed.MatMul.
type adapter struct {
	in, out, r int // r: the padded rank
	a, b       []float32
	ga, gb     []float64 // gradients, summed over a batch
}

func newAdapter(in, out, rank int, rng *rand.Rand) *adapter {
	r := (rank + 15) / 16 * 16
	ad := &adapter{in: in, out: out, r: r, a: make([]float32, r*in), b: make([]float32, out*r), ga: make([]float64, r*in), gb: make([]float64, out*r)}
	for i := range ad.a[:rank*in] {
		ad.a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(in)))
	}
	return ad
}

// forward adds the adapter's output for the M rows of x (the map's input,
// in wide) to y (ldy wide, from column off) and returns the rank codes
// z = x·Aᵀ that backward needs.
func (ad *adapter) forward(M int, x []float32, y []float32, ldy, off int) []float32 {
	P := embed.PaddedRows(M)
	z := make([]float32, P*ad.r)
	embed.MatMul(2, M, x, z, embed.PackMatrix(ad.a, ad.r, ad.in, true))
	d := make([]float32, P*ad.out)
	embed.MatMul(2, M, z, d, embed.PackMatrix(ad.b, ad.out, ad.r, true))
	for t := range M {
		yr := y[t*ldy+off : t*ldy+off+ad.out]
		for o, v := range d[t*ad.out : (t+1)*ad.out] {
			yr[o] += v
		}
	}
	return z
}

// backward adds the gradients of A and B given dy (the loss's gradient in
// the map's output, ldy wide from column off), and, when dx is not nil,
// the adapter's share of the gradient in its input (in wide, padded rows).
func (ad *adapter) backward(M int, x []float32, z, dy []float32, ldy, off int, dx []float32) {
	P := embed.PaddedRows(M)
	g := make([]float32, P*ad.out) // dy's columns of this map, padded rows
	for t := range M {
		copy(g[t*ad.out:(t+1)*ad.out], dy[t*ldy+off:t*ldy+off+ad.out])
	}
	dz := make([]float32, P*ad.r)
	embed.MatMul(2, M, g, dz, embed.PackMatrix(ad.b, ad.out, ad.r, false))
	if dx != nil {
		embed.MatMul(2, M, dz, dx, embed.PackMatrix(ad.a, ad.r, ad.in, false))
	}
	// gB = dyᵀ·z and gA = dzᵀ·x, as (zᵀ·dy)ᵀ and dzᵀ·x over the M rows.
	rp := embed.PaddedRows(ad.r)
	zt, dzt := make([]float32, rp*M), make([]float32, rp*M)
	for t := range M {
		for k := range ad.r {
			zt[k*M+t], dzt[k*M+t] = z[t*ad.r+k], dz[t*ad.r+k]
		}
	}
	gbt := make([]float32, rp*ad.out)
	embed.MatMul(2, ad.r, zt, gbt, embed.PackMatrix(g[:M*ad.out], M, ad.out, false))
	for k := range ad.r {
		for o, v := range gbt[k*ad.out : (k+1)*ad.out] {
			ad.gb[o*ad.r+k] += float64(v)
		}
	}
	ga := make([]float32, rp*ad.in)
	embed.MatMul(2, ad.r, dzt, ga, embed.PackMatrix(x[:M*ad.in], M, ad.in, false))
	for i, v := range ga[:ad.r*ad.in] {
		ad.ga[i] += float64(v)
	}
}

func dot32(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// block is one of MiniLM's layers with adapters.
type block struct {
	w        *embed.Layer
	fwd, bwd map[string]*embed.Matrix // the frozen maps, packed for x·Wᵀ and dy·W
	ad       map[string]*adapter      // by target: q, k, v, o, ff1, ff2
}

// tuned is MiniLM's top layers with adapters, and (while training) a
// logistic readout of the adapted sentence vector.
type tuned struct {
	blocks []*block  // bottom to top
	head   []float64 // readout of the sentence vector (times sqrt(hidden))
	bias   float64
	mu     sync.Mutex
	memo   map[*uint16][]float32 // extendOne's vectors, by token rows
}

// tuneTargetNames are the maps an adapter may sit on.
var tuneTargetNames = []string{"q", "k", "v", "o", "ff1", "ff2"}

func newTuned(ws []*embed.Layer, rank int, targets []string, seed uint64) (*tuned, error) {
	m := &tuned{head: make([]float64, ws[0].Hidden), memo: map[*uint16][]float32{}}
	rng := rand.New(rand.NewPCG(seed, 17))
	for _, w := range ws {
		H, I := w.Hidden, w.Intermediate
		bl := &block{w: w, ad: map[string]*adapter{},
			fwd: map[string]*embed.Matrix{
				"qkv": embed.PackMatrix(w.QKV, 3*H, H, true), "o": embed.PackMatrix(w.AttnOut, H, H, true),
				"ff1": embed.PackMatrix(w.FF1, I, H, true), "ff2": embed.PackMatrix(w.FF2, H, I, true),
			},
			bwd: map[string]*embed.Matrix{
				"qkv": embed.PackMatrix(w.QKV, 3*H, H, false), "o": embed.PackMatrix(w.AttnOut, H, H, false),
				"ff1": embed.PackMatrix(w.FF1, I, H, false), "ff2": embed.PackMatrix(w.FF2, H, I, false),
			},
		}
		for _, t := range targets {
			in, out := H, H
			switch t {
			case "q", "k", "v", "o":
			case "ff1":
				out = I
			case "ff2":
				in = I
			default:
				return nil, fmt.Errorf("-tune-targets: unknown target %q (want some of %s)", t, strings.Join(tuneTargetNames, ","))
			}
			bl.ad[t] = newAdapter(in, out, rank, rng)
		}
		m.blocks = append(m.blocks, bl)
	}
	return m, nil
}

// acts are one block's activations over a batch, as its backward pass
// needs them.
type acts struct {
	x     []float32 // input rows (the previous layer's output)
	qkv   []float32
	probs [][]float32 // per sequence and head: n×n attention weights
	ctx   []float32
	xhat1 []float32
	inv1  []float32
	h1    []float32
	u, g  []float32
	dgelu []float32 // the GELU's derivative at u
	xhat2 []float32
	inv2  []float32
	out   []float32
	z     map[string][]float32 // adapter codes
}

// batch is one forward pass over several sequences' token rows.
type batch struct {
	M      int
	starts []int
	acts   []*acts     // per block
	out    []float32   // the top block's output rows
	pooled [][]float32 // per sequence: the unit sentence vector
	norms  []float64   // per sequence: the pooled mean's length
	logits []float64
}

// forward runs the adapted layers on seqs (each a sequence's token rows,
// hidden wide).
func (m *tuned) forward(seqs [][]float32) *batch {
	H := m.blocks[0].w.Hidden
	b := &batch{starts: make([]int, len(seqs)+1)}
	for i, s := range seqs {
		b.starts[i+1] = b.starts[i] + len(s)/H
	}
	M := b.starts[len(seqs)]
	b.M = M
	x := make([]float32, embed.PaddedRows(M)*H)
	for i, s := range seqs {
		copy(x[b.starts[i]*H:], s)
	}
	for _, bl := range m.blocks {
		a := bl.forward(x, b.starts, M)
		b.acts = append(b.acts, a)
		x = a.out
	}
	b.out = x
	b.pooled, b.norms, b.logits = make([][]float32, len(seqs)), make([]float64, len(seqs)), make([]float64, len(seqs))
	scale := math.Sqrt(float64(H))
	for i := range seqs {
		acc := make([]float64, H)
		n := b.starts[i+1] - b.starts[i]
		for t := b.starts[i]; t < b.starts[i+1]; t++ {
			for j, v := range x[t*H : (t+1)*H] {
				acc[j] += float64(v)
			}
		}
		var n2 float64
		for j := range acc {
			acc[j] /= float64(max(n, 1))
			n2 += acc[j] * acc[j]
		}
		nrm := math.Max(math.Sqrt(n2), 1e-12)
		v := make([]float32, H)
		z := m.bias
		for j := range acc {
			v[j] = float32(acc[j] / nrm)
			z += m.head[j] * float64(v[j]) * scale
		}
		b.pooled[i], b.norms[i], b.logits[i] = v, nrm, z
	}
	return b
}

// forward runs the block on the M rows of x (padded), sequences starting
// at starts.
func (bl *block) forward(x []float32, starts []int, M int) *acts {
	w := bl.w
	H, I := w.Hidden, w.Intermediate
	P := embed.PaddedRows(M)
	b := &acts{x: x, z: map[string][]float32{}}
	b.qkv = rowsOf(P, M, w.QKVBias)
	embed.MatMul(2, M, b.x, b.qkv, bl.fwd["qkv"])
	for k, t := range []string{"q", "k", "v"} {
		if ad := bl.ad[t]; ad != nil {
			b.z[t] = ad.forward(M, b.x, b.qkv, 3*H, k*H)
		}
	}
	b.ctx = make([]float32, P*H)
	b.probs = make([][]float32, (len(starts)-1)*w.Heads)
	parRange(len(starts)-1, func(i int) { bl.attend(b, starts, i) })
	a := rowsOf(P, M, w.AttnOutBias)
	embed.MatMul(2, M, b.ctx, a, bl.fwd["o"])
	if ad := bl.ad["o"]; ad != nil {
		b.z["o"] = ad.forward(M, b.ctx, a, H, 0)
	}
	for i := range M * H {
		a[i] += b.x[i]
	}
	b.h1, b.xhat1, b.inv1 = layerNormRows(a, M, H, w.LN1Gain, w.LN1Bias, w.LayerNormEps)
	b.u = rowsOf(P, M, w.FF1Bias)
	embed.MatMul(2, M, b.h1, b.u, bl.fwd["ff1"])
	if ad := bl.ad["ff1"]; ad != nil {
		b.z["ff1"] = ad.forward(M, b.h1, b.u, I, 0)
	}
	b.g, b.dgelu = make([]float32, P*I), make([]float32, M*I)
	parRange(M, func(t int) {
		for j := t * I; j < (t+1)*I; j++ {
			g, d := gelu64(float64(b.u[j]))
			b.g[j], b.dgelu[j] = float32(g), float32(d)
		}
	})
	f := rowsOf(P, M, w.FF2Bias)
	embed.MatMul(2, M, b.g, f, bl.fwd["ff2"])
	if ad := bl.ad["ff2"]; ad != nil {
		b.z["ff2"] = ad.forward(M, b.g, f, H, 0)
	}
	for i := range M * H {
		f[i] += b.h1[i]
	}
	b.out, b.xhat2, b.inv2 = layerNormRows(f, M, H, w.LN2Gain, w.LN2Bias, w.LayerNormEps)
	return b
}

// attend computes sequence i's attention, every head.
func (bl *block) attend(b *acts, starts []int, i int) {
	H, nh := bl.w.Hidden, bl.w.Heads
	dh := H / nh
	r0, n := starts[i], starts[i+1]-starts[i]
	for h := range nh {
		p := make([]float32, n*n)
		for s := range n {
			q := b.qkv[(r0+s)*3*H+h*dh : (r0+s)*3*H+(h+1)*dh]
			row := p[s*n : (s+1)*n]
			top := float32(math.Inf(-1))
			for t := range n {
				k := b.qkv[(r0+t)*3*H+H+h*dh : (r0+t)*3*H+H+(h+1)*dh]
				row[t] = dot32(q, k)
				top = max(top, row[t])
			}
			var sum float64
			for t := range row {
				e := math.Exp(float64(row[t] - top))
				row[t] = float32(e)
				sum += e
			}
			c := b.ctx[(r0+s)*H+h*dh : (r0+s)*H+(h+1)*dh]
			for t := range row {
				row[t] = float32(float64(row[t]) / sum)
				v := b.qkv[(r0+t)*3*H+2*H+h*dh : (r0+t)*3*H+2*H+(h+1)*dh]
				for d, x := range v {
					c[d] += row[t] * x
				}
			}
		}
		b.probs[i*nh+h] = p
	}
}

// backward adds to the adapters' and the head's gradients those of the
// summed loss whose gradient in sequence i's logit is dz[i].
func (m *tuned) backward(b *batch, dz []float64, gHead []float64, gBias *float64) {
	H, M := m.blocks[0].w.Hidden, b.M
	scale := math.Sqrt(float64(H))
	dout := make([]float32, embed.PaddedRows(M)*H)
	for i, e := range dz {
		if e == 0 {
			continue
		}
		*gBias += e
		v := b.pooled[i]
		var vd float64
		dv := make([]float64, H)
		for j := range H {
			gHead[j] += e * float64(v[j]) * scale
			dv[j] = e * m.head[j] * scale
			vd += float64(v[j]) * dv[j]
		}
		n := b.starts[i+1] - b.starts[i]
		for j := range H {
			dp := (dv[j] - float64(v[j])*vd) / b.norms[i] / float64(n)
			for t := b.starts[i]; t < b.starts[i+1]; t++ {
				dout[t*H+j] = float32(dp)
			}
		}
	}
	for l := len(m.blocks) - 1; l >= 0; l-- {
		dout = m.blocks[l].backward(b.acts[l], b.starts, M, dout, l > 0)
	}
}

// backward adds the block's adapter gradients given dout, the gradient in
// its output rows, and returns the gradient in its input rows when needDX
// (a block below has adapters), else nil.
func (bl *block) backward(b *acts, starts []int, M int, dout []float32, needDX bool) []float32 {
	w := bl.w
	H, I := w.Hidden, w.Intermediate
	P := embed.PaddedRows(M)
	dy2 := layerNormBack(dout, b.xhat2, b.inv2, M, H, w.LN2Gain)
	// y2 = h1 + f: the residual passes dy2 to h1, the map to f.
	dh1 := make([]float32, P*H)
	copy(dh1, dy2[:M*H])
	dg := make([]float32, P*I)
	embed.MatMul(2, M, dy2, dg, bl.bwd["ff2"])
	if ad := bl.ad["ff2"]; ad != nil {
		ad.backward(M, b.g, b.z["ff2"], dy2, H, 0, dg)
	}
	du := make([]float32, P*I)
	parRange(M, func(t int) {
		for j := t * I; j < (t+1)*I; j++ {
			du[j] = dg[j] * b.dgelu[j]
		}
	})
	qkvAd := bl.ad["q"] != nil || bl.ad["k"] != nil || bl.ad["v"] != nil
	below := needDX || qkvAd || bl.ad["o"] != nil
	var dh1x []float32
	if below {
		dh1x = dh1
	}
	if ad := bl.ad["ff1"]; ad != nil {
		ad.backward(M, b.h1, b.z["ff1"], du, I, 0, dh1x)
	}
	if !below {
		return nil
	}
	embed.MatMul(2, M, du, dh1, bl.bwd["ff1"])
	dy1 := layerNormBack(dh1, b.xhat1, b.inv1, M, H, w.LN1Gain)
	dctx := make([]float32, P*H)
	embed.MatMul(2, M, dy1, dctx, bl.bwd["o"])
	if ad := bl.ad["o"]; ad != nil {
		ad.backward(M, b.ctx, b.z["o"], dy1, H, 0, dctx)
	}
	if !needDX && !qkvAd {
		return nil
	}
	dqkv := make([]float32, P*3*H)
	parRange(len(starts)-1, func(i int) { bl.attendBack(b, starts, i, dctx, dqkv) })
	var dx []float32
	if needDX {
		// y1 = x + attention: the residual passes dy1 to x.
		dx = dy1
		embed.MatMul(2, M, dqkv, dx, bl.bwd["qkv"])
	}
	for k, t := range []string{"q", "k", "v"} {
		if ad := bl.ad[t]; ad != nil {
			ad.backward(M, b.x, b.z[t], dqkv, 3*H, k*H, dx)
		}
	}
	return dx
}

// attendBack writes sequence i's gradients in the queries, keys and values
// given dctx.
func (bl *block) attendBack(b *acts, starts []int, i int, dctx, dqkv []float32) {
	H, nh := bl.w.Hidden, bl.w.Heads
	dh := H / nh
	r0, n := starts[i], starts[i+1]-starts[i]
	qkv := func(t, part, h int) []float32 {
		o := (r0+t)*3*H + part*H + h*dh
		return b.qkv[o : o+dh]
	}
	dq := func(t, part, h int) []float32 {
		o := (r0+t)*3*H + part*H + h*dh
		return dqkv[o : o+dh]
	}
	ds := make([]float32, n)
	for h := range nh {
		p := b.probs[i*nh+h]
		for s := range n {
			dc := dctx[(r0+s)*H+h*dh : (r0+s)*H+(h+1)*dh]
			row := p[s*n : (s+1)*n]
			var sum float32
			for t := range n {
				ds[t] = dot32(dc, qkv(t, 2, h))
				sum += row[t] * ds[t]
				dv := dq(t, 2, h)
				for d, g := range dc {
					dv[d] += row[t] * g
				}
			}
			q, dqs := qkv(s, 0, h), dq(s, 0, h)
			for t := range n {
				g := row[t] * (ds[t] - sum)
				k, dk := qkv(t, 1, h), dq(t, 1, h)
				for d := range dh {
					dqs[d] += g * k[d]
					dk[d] += g * q[d]
				}
			}
		}
	}
}

// rowsOf returns P rows of width len(bias), the first M set to bias.
func rowsOf(P, M int, bias []float32) []float32 {
	n := len(bias)
	out := make([]float32, P*n)
	for t := range M {
		copy(out[t*n:(t+1)*n], bias)
	}
	return out
}

// layerNormRows normalises the first M rows of x (H wide) and returns the
// output (padded as x), the normalised inputs and each row's inverse
// standard deviation.
func layerNormRows(x []float32, M, H int, gain, bias []float32, eps float32) (out, xhat, inv []float32) {
	out, xhat, inv = make([]float32, len(x)), make([]float32, M*H), make([]float32, M)
	for t := range M {
		r := x[t*H : (t+1)*H]
		var mean, vs float64
		for _, v := range r {
			mean += float64(v)
		}
		mean /= float64(H)
		for _, v := range r {
			d := float64(v) - mean
			vs += d * d
		}
		iv := 1 / math.Sqrt(vs/float64(H)+float64(eps))
		inv[t] = float32(iv)
		for j, v := range r {
			xh := float32((float64(v) - mean) * iv)
			xhat[t*H+j] = xh
			out[t*H+j] = xh*gain[j] + bias[j]
		}
	}
	return out, xhat, inv
}

// layerNormBack returns the gradient in a layer norm's input given the one
// in its output (padded rows, as MatMul wants them).
func layerNormBack(dout, xhat, inv []float32, M, H int, gain []float32) []float32 {
	dx := make([]float32, embed.PaddedRows(M)*H)
	dxh := make([]float64, H)
	for t := range M {
		var m1, m2 float64
		for j := range H {
			dxh[j] = float64(dout[t*H+j] * gain[j])
			m1 += dxh[j]
			m2 += dxh[j] * float64(xhat[t*H+j])
		}
		m1 /= float64(H)
		m2 /= float64(H)
		for j := range H {
			dx[t*H+j] = float32(float64(inv[t]) * (dxh[j] - m1 - float64(xhat[t*H+j])*m2))
		}
	}
	return dx
}

// gelu64 is the exact GELU, x·Φ(x), and its derivative Φ(x) + x·φ(x).
func gelu64(x float64) (y, dy float64) {
	phi := 0.5 * (1 + math.Erf(x/math.Sqrt2))
	return x * phi, phi + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
}

// parRange runs fn(0..n-1) on two goroutines (the machine's cores).
func parRange(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 2 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// tuneShared fits the adapters once per leave-one-source-out fold, on all
// its training documents, and reuses them in the five inner fits that
// choose the threshold (flag -tune-shared): six times faster, and the
// held-out scores are those of the same final model, but the threshold is
// chosen on documents the adapters were trained on, so it comes out low.
// For comparing representations by the threshold-free figures only.
var tuneShared bool

// sharedTune is the fold's adapters under -tune-shared while its
// threshold is chosen.
var sharedTune *tuned

// tuneWeights are the adapted layers' frozen weights, bottom to top (set
// by prepare when -tune is on).
var tuneWeights []*embed.Layer

// fitTune trains the adapters and the readout on the parts ins (labels
// ys), whose token rows are the layer below the first adapted one's.
func fitTune(ins []instance, ys []bool, dim int) *tuned {
	if len(tuneWeights) == 0 || dim != tuneWeights[0].Hidden {
		panic(fmt.Sprintf("fitTune: token rows of width %d, want the hidden width of layer %d", dim, tuneFrom()-1))
	}
	m, err := newTuned(tuneWeights, tuneRank, strings.Split(tuneTargets, ","), 7)
	if err != nil {
		panic(err)
	}
	wpos, wneg := classWeights(ys)
	rng := rand.New(rand.NewPCG(7, 11))
	order := make([]int, 0, len(ins))
	for i, in := range ins {
		if len(in.tok) > 0 {
			order = append(order, i)
		}
	}
	opt := &adam{lr: tuneLR, l2: tuneL2}
	gHead := make([]float64, len(m.head))
	gBias := make([]float64, 1)
	for ep := range tuneEpochs {
		start, loss := time.Now(), 0.0
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for lo := 0; lo < len(order); lo += tuneBatch {
			hi := min(lo+tuneBatch, len(order))
			seqs := make([][]float32, 0, hi-lo)
			for _, i := range order[lo:hi] {
				seqs = append(seqs, decodeRows(ins[i].tok))
			}
			b := m.forward(seqs)
			dz := make([]float64, len(seqs))
			for k, i := range order[lo:hi] {
				wt, y := wneg, 0.0
				if ys[i] {
					wt, y = wpos, 1
				}
				p := 1 / (1 + math.Exp(-b.logits[k]))
				dz[k] = wt * (p - y)
				loss -= wt * (y*math.Log(max(p, 1e-12)) + (1-y)*math.Log(max(1-p, 1e-12)))
			}
			m.backward(b, dz, gHead, &gBias[0])
			opt.step++
			bs := float64(hi - lo)
			p := 0
			for _, bl := range m.blocks {
				for _, t := range tuneTargetNames {
					if ad := bl.ad[t]; ad != nil {
						opt.update(p, ad.a, nil, ad.ga, bs, true)
						opt.update(p+1, ad.b, nil, ad.gb, bs, true)
					}
					p += 2
				}
			}
			opt.update(p, nil, m.head, gHead, bs, true)
			opt.scalar(p+1, &m.bias, gBias, bs)
		}
		fmt.Fprintf(os.Stderr, "tune: epoch %d of %d over %d parts, loss %.4f, %v\n", ep+1, tuneEpochs, len(order), loss/float64(len(order)), time.Since(start).Round(time.Second))
	}
	return m
}

// decodeRows widens bfloat16 token rows to float32.
func decodeRows(tok []uint16) []float32 {
	out := make([]float32, len(tok))
	for i, h := range tok {
		out[i] = unbf16(h)
	}
	return out
}

// vector is the adapted sentence vector of a part's token rows.
func (m *tuned) vector(tok []uint16) []float32 {
	if len(tok) == 0 {
		return make([]float32, len(m.head))
	}
	m.mu.Lock()
	v, ok := m.memo[&tok[0]]
	m.mu.Unlock()
	if ok {
		return v
	}
	v = m.forward([][]float32{decodeRows(tok)}).pooled[0]
	m.mu.Lock()
	m.memo[&tok[0]] = v
	m.mu.Unlock()
	return v
}

func (m *tuned) extendOne(in instance) instance {
	return withFeatures(in, m.vector(in.tok))
}

// extend computes the vectors of the parts of the documents in idx in
// batches (one at a time wastes the matrix products), then appends them.
func (m *tuned) extend(f *featurized, idx []int) *featurized {
	var pending []instance
	flush := func() {
		if len(pending) == 0 {
			return
		}
		seqs := make([][]float32, len(pending))
		for i, in := range pending {
			seqs[i] = decodeRows(in.tok)
		}
		b := m.forward(seqs)
		m.mu.Lock()
		for i, in := range pending {
			m.memo[&in.tok[0]] = b.pooled[i]
		}
		m.mu.Unlock()
		pending = pending[:0]
	}
	for _, i := range idx {
		for _, set := range [][]instance{f.parts[i], f.attack[i]} {
			for _, in := range set {
				if len(in.tok) > 0 {
					m.mu.Lock()
					_, ok := m.memo[&in.tok[0]]
					m.mu.Unlock()
					if !ok {
						pending = append(pending, in)
					}
				}
				if len(pending) == 64 {
					flush()
				}
			}
		}
	}
	flush()
	return extendWith(m, f, idx)
}
