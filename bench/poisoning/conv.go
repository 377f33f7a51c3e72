package main

import (
	"math"
	"math/rand/v2"
)

// convFilters is the number of learned n-gram detectors over the token
// vectors of attnLayers (flag -conv; 0: none). Filter k slides a window of
// convWidth standardised token vectors, and its feature is the largest
// rectified response anywhere in the part: a learned phrase detector that
// matches paraphrases because it reads contextual vectors, not words.
// Tried and not kept: it lost to the attention heads on the
// leave-one-source-out folds (bench/poisoning/DATA.md); the runtime has
// no convolution, so it exists for -attn-loso only.
var (
	convFilters = 0
	convWidth   = 3
	convL2      = 1e-3
	convEpochs  = 6
)

// conv is a one-layer convolution over a part's token vectors with max
// pooling over positions, and (stage one only) a linear readout.
type conv struct {
	filters, width, dim int
	mu, sd              []float64
	w                   []float32 // filters × width × dim
	c                   []float64 // per filter bias
	v                   []float64 // stage-one readout per filter
	b                   float64
}

// standardized decodes a part's token rows, standardised, as float32.
func (c *conv) standardized(tok []uint16) [][]float32 {
	return standardRows[float32](tok, c.mu, c.sd)
}

// standardRows decodes bfloat16 token rows of len(mu) values each and
// standardises them with mu and sd (computed in float64, stored as T).
func standardRows[T float32 | float64](tok []uint16, mu, sd []float64) [][]T {
	dim := len(mu)
	h := make([][]T, len(tok)/dim)
	for t := range h {
		row := make([]T, dim)
		for j := range row {
			row[j] = T((float64(unbf16(tok[t*dim+j])) - mu[j]) / sd[j])
		}
		h[t] = row
	}
	return h
}

// forward returns each filter's max-pooled rectified response and the
// window start where it peaked (-1 when no window responded).
func (c *conv) forward(h [][]float32) ([]float64, []int) {
	act, at := make([]float64, c.filters), make([]int, c.filters)
	for k := range at {
		at[k] = -1
	}
	// A part shorter than the window is read as one window padded with
	// zero vectors (the standardised mean).
	starts := max(len(h)-c.width+1, 1)
	if len(h) == 0 {
		return act, at
	}
	// proj[t][k*width+o] = w_k[o]·h_t
	FW := c.filters * c.width
	proj := make([]float32, len(h)*FW)
	for t, row := range h {
		p := proj[t*FW : (t+1)*FW]
		for r := range FW {
			wr := c.w[r*c.dim : (r+1)*c.dim]
			var s float32
			for j, v := range row {
				s += wr[j] * v
			}
			p[r] = s
		}
	}
	for k := range c.filters {
		best := 0.0
		for t := range starts {
			s := c.c[k]
			for o := range c.width {
				if t+o < len(h) {
					s += float64(proj[(t+o)*FW+k*c.width+o])
				}
			}
			if s > best {
				best, at[k] = s, t
			}
		}
		act[k] = best
	}
	return act, at
}

func (c *conv) pool(tok []uint16) []float32 {
	act, _ := c.forward(c.standardized(tok))
	out := make([]float32, len(act))
	for k, a := range act {
		out[k] = float32(a)
	}
	return out
}

func (c *conv) extendOne(in instance) instance {
	p := c.pool(in.tok)
	return withFeatures(in, p)
}

func (c *conv) extend(f *featurized, idx []int) *featurized {
	return extendWith(c, f, idx)
}

// fitConv learns the filters on the parts ins (labels ys) with a model that
// reads only their pooled responses: z = b + Σ_k v_k·act_k.
func fitConv(ins []instance, ys []bool, dim int) *conv {
	c := &conv{filters: convFilters, width: convWidth, dim: dim, c: make([]float64, convFilters), v: make([]float64, convFilters)}
	c.mu, c.sd = tokenMoments(ins, dim)
	rng := rand.New(rand.NewPCG(13, 17))
	c.w = make([]float32, c.filters*c.width*dim)
	scale := 1 / math.Sqrt(float64(c.width*dim))
	for i := range c.w {
		c.w[i] = float32(rng.NormFloat64() * scale)
	}
	for k := range c.v {
		c.v[k] = rng.NormFloat64() * 0.1
	}
	wpos, wneg := classWeights(ys)
	nw, F := len(c.w), c.filters
	g := make([]float64, nw+2*F+1)
	opt := &adam{lr: attnLR, l2: convL2}
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	// The standardised rows of every part, decoded once.
	hs := make([][][]float32, len(ins))
	for i, in := range ins {
		hs[i] = c.standardized(in.tok)
	}
	for range convEpochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for lo := 0; lo < len(order); lo += attnBatch {
			hi := min(lo+attnBatch, len(order))
			clear(g)
			for _, i := range order[lo:hi] {
				wt := wneg
				if ys[i] {
					wt = wpos
				}
				c.grad(hs[i], ys[i], wt, g)
			}
			bs := float64(hi - lo)
			opt.step++
			opt.update(0, c.w, nil, g[:nw], bs, true)
			opt.update(1, nil, c.c, g[nw:nw+F], bs, false)
			opt.update(2, nil, c.v, g[nw+F:nw+2*F], bs, true)
			opt.scalar(3, &c.b, g[nw+2*F:], bs)
		}
	}
	return c
}

// grad adds to g (filters, filter biases, readouts, bias) the gradient of
// the weighted logistic loss of one part. Max pooling passes the gradient
// to the peak window only, and only where it responded.
func (c *conv) grad(h [][]float32, y bool, wt float64, g []float64) {
	act, at := c.forward(h)
	z := c.b
	for k, a := range act {
		z += c.v[k] * a
	}
	yy := 0.0
	if y {
		yy = 1
	}
	e := wt * (1/(1+math.Exp(-z)) - yy)
	nw := len(c.w)
	for k, a := range act {
		g[nw+c.filters+k] += e * a
		if at[k] < 0 {
			continue
		}
		d := e * c.v[k]
		g[nw+k] += d
		for o := range c.width {
			t := at[k] + o
			if t >= len(h) {
				break
			}
			gw := g[(k*c.width+o)*c.dim : (k*c.width+o+1)*c.dim]
			for j, v := range h[t] {
				gw[j] += d * float64(v)
			}
		}
	}
	g[len(g)-1] += e
}

// tokenMoments are the per-dimension mean and standard deviation of every
// token row of ins (dim wide).
func tokenMoments(ins []instance, dim int) (mu, sd []float64) {
	mu, sd = make([]float64, dim), make([]float64, dim)
	var n float64
	for _, in := range ins {
		for t := 0; t+dim <= len(in.tok); t += dim {
			for j := range dim {
				v := float64(unbf16(in.tok[t+j]))
				mu[j] += v
				sd[j] += v * v
			}
			n++
		}
	}
	for j := range dim {
		mu[j] /= max(n, 1)
		sd[j] = math.Sqrt(max(sd[j]/max(n, 1)-mu[j]*mu[j], 0)) + 1e-3
	}
	return mu, sd
}

// classCounts counts the positive and negative labels.
func classCounts(ys []bool) (npos, nneg float64) {
	for _, y := range ys {
		if y {
			npos++
		} else {
			nneg++
		}
	}
	return npos, nneg
}

// classWeights are fitLogistic's class weights, scaled so that a
// mini-batch's mean gradient has the size of an unweighted one.
func classWeights(ys []bool) (wpos, wneg float64) {
	npos, nneg := classCounts(ys)
	return posWeight / max(npos, 1) * float64(len(ys)), (1 - posWeight) / max(nneg, 1) * float64(len(ys))
}

// withFeatures returns in with the features p appended (to a copy: the
// instance's own features are shared with other fits).
func withFeatures(in instance, p []float32) instance {
	in.x = append(append(make([]float32, 0, len(in.x)+len(p)), in.x...), p...)
	return in
}

// tokenPooler turns a part's token rows into extra features (attention
// heads, convolution filters).
type tokenPooler interface {
	extendOne(in instance) instance
}

// extendWith returns f with p's features appended to the parts of the
// documents in idx (the others are left out).
func extendWith(p tokenPooler, f *featurized, idx []int) *featurized {
	g := &featurized{parts: make([][]instance, len(f.parts)), attack: make([][]instance, len(f.attack)), whole: f.whole, tokens: f.tokens}
	ext := func(ins []instance) []instance {
		out := make([]instance, len(ins))
		for i, in := range ins {
			out[i] = p.extendOne(in)
		}
		return out
	}
	for _, i := range idx {
		g.parts[i], g.attack[i] = ext(f.parts[i]), ext(f.attack[i])
	}
	return g
}
