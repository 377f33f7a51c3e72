package main

import "math"

// adam is mini-batch Adam (β 0.9 and 0.999) over float32 and float64
// parameter slices, each with its gradient (float64, summed over a batch),
// for the first stages of the attention heads, the convolution and the
// adapters. The caller increments step once per batch.
type adam struct {
	step   int
	lr, l2 float64
	m1, m2 [][]float64
}

func (o *adam) update(i int, w32 []float32, w64 []float64, g []float64, bs float64, decay bool) {
	for len(o.m1) <= i {
		o.m1, o.m2 = append(o.m1, make([]float64, len(g))), append(o.m2, make([]float64, len(g)))
	}
	m1, m2 := o.m1[i], o.m2[i]
	c1, c2 := 1-math.Pow(0.9, float64(o.step)), 1-math.Pow(0.999, float64(o.step))
	for j := range g {
		var w float64
		if w32 != nil {
			w = float64(w32[j])
		} else {
			w = w64[j]
		}
		gj := g[j] / bs
		if decay {
			gj += o.l2 * w
		}
		m1[j] = 0.9*m1[j] + 0.1*gj
		m2[j] = 0.999*m2[j] + 0.001*gj*gj
		w -= o.lr * (m1[j] / c1) / (math.Sqrt(m2[j]/c2) + 1e-8)
		if w32 != nil {
			w32[j] = float32(w)
		} else {
			w64[j] = w
		}
	}
	clear(g)
}

// scalar updates one parameter held outside a slice (a bias) without
// weight decay.
func (o *adam) scalar(i int, w *float64, g []float64, bs float64) {
	v := []float64{*w}
	o.update(i, nil, v, g, bs, false)
	*w = v[0]
}
