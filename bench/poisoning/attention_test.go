package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestAttentionGrad compares grad with finite differences of the loss, for
// every kind of parameter (queries, readouts, bias) of two heads.
func TestAttentionGrad(t *testing.T) {
	const dim, tokens = 6, 5
	rng := rand.New(rand.NewPCG(1, 2))
	a := &attention{heads: 2, dim: dim, mu: make([]float64, dim), sd: make([]float64, dim), q: make([]float64, 2*dim), v: make([]float64, 2*dim), b: 0.1}
	for j := range dim {
		a.mu[j], a.sd[j] = 0.2, 1.5
	}
	for i := range a.q {
		a.q[i], a.v[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	tok := make([]uint16, tokens*dim)
	for i := range tok {
		tok[i] = bf16(float32(rng.NormFloat64()))
	}
	for _, y := range []bool{false, true} {
		const wt = 0.7
		loss := func() float64 {
			p := 1 / (1 + math.Exp(-a.logit(tok)))
			if y {
				return -wt * math.Log(p)
			}
			return -wt * math.Log(1-p)
		}
		g := make([]float64, 2*len(a.q)+1)
		a.grad(tok, y, wt, g)
		for j := range g {
			w := a.param(j)
			old := *w
			const eps = 1e-6
			*w = old + eps
			up := loss()
			*w = old - eps
			down := loss()
			*w = old
			if num := (up - down) / (2 * eps); math.Abs(num-g[j]) > 1e-6+1e-4*math.Abs(num) {
				t.Errorf("y=%v, parameter %d: grad %g, finite difference %g", y, j, g[j], num)
			}
		}
	}
}

// TestAttentionLearnsTheToken trains one head on parts whose label is the
// presence of one token vector among noise: the head must weigh that token
// most, which a mean could not.
func TestAttentionLearnsTheToken(t *testing.T) {
	const dim = 8
	rng := rand.New(rand.NewPCG(3, 4))
	marker := make([]float32, dim)
	marker[2], marker[5] = 3, -3
	var ins []instance
	var ys []bool
	for i := range 400 {
		n := 4 + i%6
		tok := make([]uint16, n*dim)
		for j := range tok {
			tok[j] = bf16(float32(rng.NormFloat64()))
		}
		y := i%2 == 0
		if y {
			at := rng.IntN(n)
			for j, v := range marker {
				tok[at*dim+j] = bf16(v)
			}
		}
		ins, ys = append(ins, instance{tok: tok}), append(ys, y)
	}
	defer func(h, e int) { attnHeads, attnEpochs = h, e }(attnHeads, attnEpochs)
	attnHeads, attnEpochs = 1, 20
	a := fitAttention(ins, ys, dim)
	right := 0
	for i, in := range ins {
		if (a.logit(in.tok) > 0) == ys[i] {
			right++
		}
	}
	if right < 380 {
		t.Errorf("stage-one model right on %d of 400 training parts", right)
	}
	// The marked token's weight in a long part.
	tok := make([]uint16, 9*dim)
	for j := range tok {
		tok[j] = bf16(float32(rng.NormFloat64()))
	}
	for j, v := range marker {
		tok[4*dim+j] = bf16(v)
	}
	w := a.weights(0, a.standardized(tok))
	for t2, x := range w {
		if t2 != 4 && x >= w[4] {
			t.Errorf("token %d weighs %.3f, the marked token %.3f", t2, x, w[4])
		}
	}
}

func TestTokenStoreRoundTrip(t *testing.T) {
	for _, f := range []float32{0, 1, -2.5, 3.140625, 1e-3} {
		if got := unbf16(bf16(f)); math.Abs(float64(got-f)) > math.Abs(float64(f))/128 {
			t.Errorf("bf16 %g -> %g", f, got)
		}
	}
	path := filepath.Join(t.TempDir(), "tokens.bin")
	s := &tokenStore{path: path, rows: map[[32]byte][]uint16{{1}: {1, 2, 3}, {2}: {}, {3}: {65535}}, dirty: true}
	s.save()
	r := &tokenStore{path: path, rows: map[[32]byte][]uint16{}}
	r.load()
	if len(r.rows) != 3 || len(r.rows[[32]byte{1}]) != 3 || r.rows[[32]byte{1}][2] != 3 || r.rows[[32]byte{3}][0] != 65535 {
		t.Errorf("loaded %v", r.rows)
	}
}

// TestAttentionExport checks the runtime scores a part with exported
// attention weights as the trainer does.
func TestAttentionExport(t *testing.T) {
	const dim = 8
	rng := rand.New(rand.NewPCG(5, 6))
	var ins []instance
	var ys []bool
	for i := range 200 {
		tok := make([]uint16, (3+i%4)*dim)
		for j := range tok {
			tok[j] = bf16(float32(rng.NormFloat64()))
		}
		ins = append(ins, instance{x: []float32{float32(rng.NormFloat64()), float32(i % 2)}, tok: tok})
		ys = append(ys, i%2 == 0)
	}
	defer func(h int) { attnHeads = h }(attnHeads)
	attnHeads = 2
	a := fitAttention(ins, ys, dim)
	ext := make([]instance, len(ins))
	for i, in := range ins {
		ext[i] = a.extendOne(in)
	}
	m := fitLogistic(ext, ys)
	m.att = a
	lm := m.export(0.5)
	if lm.Attention == nil || lm.Attention.Heads != 2 || len(lm.Weights) != 2+2*dim {
		t.Fatalf("exported %d weights, attention %+v", len(lm.Weights), lm.Attention)
	}
	for i, in := range ins {
		toks := make([]float32, len(in.tok))
		for j, h := range in.tok {
			toks[j] = unbf16(h)
		}
		got := lm.Score(in.x, nil, lm.Attention.Pool(toks), nil)
		if want := m.score(ext[i]); math.Abs(got-want) > 1e-4 {
			t.Fatalf("part %d: runtime %.5f, trainer %.5f", i, got, want)
		}
	}
}

// TestConvGrad compares conv.grad with finite differences of the loss for
// filters, filter biases, readouts and bias, on a part longer than the
// window and on one shorter (the padded window).
func TestConvGrad(t *testing.T) {
	const dim = 5
	rng := rand.New(rand.NewPCG(5, 6))
	c := &conv{filters: 3, width: 3, dim: dim, mu: make([]float64, dim), sd: make([]float64, dim), w: make([]float32, 3*3*dim), c: []float64{0.3, 0.2, 0.4}, v: make([]float64, 3), b: -0.1}
	for j := range dim {
		c.mu[j], c.sd[j] = 0.1, 1.2
	}
	for i := range c.w {
		c.w[i] = float32(rng.NormFloat64())
	}
	for k := range c.v {
		c.v[k] = rng.NormFloat64()
	}
	for _, tokens := range []int{6, 2} {
		tok := make([]uint16, tokens*dim)
		for i := range tok {
			tok[i] = bf16(float32(rng.NormFloat64()))
		}
		h := c.standardized(tok)
		for _, y := range []bool{false, true} {
			const wt = 0.7
			loss := func() float64 {
				act, _ := c.forward(h)
				z := c.b
				for k, a := range act {
					z += c.v[k] * a
				}
				p := 1 / (1 + math.Exp(-z))
				if y {
					return -wt * math.Log(p)
				}
				return -wt * math.Log(1-p)
			}
			g := make([]float64, len(c.w)+2*c.filters+1)
			c.grad(h, y, wt, g)
			nw := len(c.w)
			for j := range g {
				const eps = 1e-3
				var num float64
				switch {
				case j < nw:
					old := c.w[j]
					c.w[j] = old + eps
					up := loss()
					c.w[j] = old - eps
					down := loss()
					c.w[j] = old
					num = (up - down) / (2 * eps)
				default:
					p := &c.b
					if j < nw+c.filters {
						p = &c.c[j-nw]
					} else if j < nw+2*c.filters {
						p = &c.v[j-nw-c.filters]
					}
					old := *p
					*p = old + eps
					up := loss()
					*p = old - eps
					down := loss()
					*p = old
					num = (up - down) / (2 * eps)
				}
				if math.Abs(num-g[j]) > 1e-3+1e-2*math.Abs(num) {
					t.Errorf("%d tokens, y=%v, parameter %d: grad %g, finite difference %g", tokens, y, j, g[j], num)
				}
			}
		}
	}
}
