package embed

import (
	"math"
	"sync"
)

// workspace holds the activation buffers of one forward pass; buffers are
// reused across passes (see MiniLM.pool).
type workspace struct {
	x, h, ctx, qkv, ff []float32
	att                []attScratch
}

// attScratch is per-goroutine scratch for attention.
type attScratch struct {
	kp, vp, scores, out, inv []float32
}

// forward runs BERT on a batch of sequences, concatenated without padding:
// every dense layer is one matrix product over all tokens of the batch;
// attention is computed per sequence and head. After each layer (1-based)
// it hands every sequence's token rows to sink, which must not keep them.
func (m *MiniLM) forward(ws *workspace, seqs []seq, par int, sink sink) {
	H, I := m.cfg.HiddenSize, m.cfg.Intermediate
	eps := float32(m.cfg.LayerNormEps)
	M := 0
	starts := make([]int, len(seqs))
	for i, s := range seqs {
		starts[i] = M
		M += len(s.ids)
	}
	// Row padding lets micro-kernels read/write whole tiles past the end.
	Mp := roundUp(M, rowAlign) + rowAlign
	ws.x = grow(ws.x, Mp*H)
	ws.h = grow(ws.h, Mp*H)
	ws.ctx = grow(ws.ctx, Mp*H)
	ws.qkv = grow(ws.qkv, Mp*3*H)
	ws.ff = grow(ws.ff, Mp*I)
	if len(ws.att) < par {
		ws.att = append(ws.att, make([]attScratch, par-len(ws.att))...)
	}
	x, h, ctxb, qkv, ff := ws.x, ws.h, ws.ctx, ws.qkv, ws.ff
	clear(x[M*H:])
	clear(ctxb[M*H:])

	// Embeddings: word + position + token type 0, then LayerNorm.
	for si, s := range seqs {
		for p, id := range s.ids {
			row := x[(starts[si]+p)*H : (starts[si]+p+1)*H]
			we := m.wordEmb[int(id)*H : int(id+1)*H]
			pe := m.posEmb[p*H : (p+1)*H]
			f16 := f16table()
			for j := range row {
				row[j] = f16[we[j]] + pe[j] + m.typeEmb[j]
			}
			layerNorm(row, m.embLNg, m.embLNb, eps)
		}
	}
	mp := roundUp(M, rowAlign)
	for li := range m.layers {
		L := &m.layers[li]
		// Q, K, V in one product.
		fillBias(qkv, L.qkvB, mp)
		parGemm(par, mp, 3*H, H, x, H, L.qkv, qkv, 3*H)
		m.attention(ws, seqs, starts, par)
		// Attention output projection + residual + LayerNorm.
		fillBias(h, L.aoB, mp)
		parGemm(par, mp, H, H, ctxb, H, L.ao, h, H)
		addNorm(par, x, h, M, H, L.ln1g, L.ln1b, eps)
		// Feed-forward.
		fillBias(ff, L.ff1B, mp)
		parGemm(par, mp, I, H, x, H, L.ff1, ff, I)
		parFor(par, M, func(lo, hi int) {
			geluSlice(ff[lo*I : hi*I])
		})
		fillBias(h, L.ff2B, mp)
		parGemm(par, mp, H, I, ff, I, L.ff2, h, H)
		addNorm(par, x, h, M, H, L.ln2g, L.ln2b, eps)
		for si, s := range seqs {
			sink(li+1, s, x[starts[si]*H:(starts[si]+len(s.ids))*H])
		}
	}
}

// sink receives a sequence's token rows after a layer of the forward pass.
type sink func(layer int, s seq, rows []float32)

// poolSink pools the views of pool into out[s.idx].
func (m *MiniLM) poolSink(out [][]float32, pool Pooling) sink {
	H, last := m.cfg.HiddenSize, len(m.layers)
	views := pool.views()
	return func(layer int, s seq, rows []float32) {
		for vi, v := range views {
			if v.layer == layer || (v.layer == 0 && layer == last) {
				poolInto(out[s.idx][vi*H:(vi+1)*H], rows, H, v.max, len(views))
			}
		}
	}
}

// poolInto writes the mean (or the maximum) over the token rows of x to v,
// scaled to length 1/sqrt(n): n such views concatenate to a unit vector.
func poolInto(v, x []float32, H int, takeMax bool, n int) {
	acc := make([]float64, H)
	rows := len(x) / H
	if takeMax {
		for j := range acc {
			acc[j] = math.Inf(-1)
		}
	}
	for p := range rows {
		for j, r := range x[p*H : (p+1)*H] {
			if takeMax {
				acc[j] = math.Max(acc[j], float64(r))
			} else {
				acc[j] += float64(r)
			}
		}
	}
	var n2 float64
	for j := range acc {
		if !takeMax {
			acc[j] /= float64(rows)
		}
		n2 += acc[j] * acc[j]
	}
	inv := 1 / math.Max(math.Sqrt(n2), 1e-12) / math.Sqrt(float64(n))
	for j := range v {
		v[j] = float32(acc[j] * inv)
	}
}

// attention computes ws.ctx from ws.qkv for every sequence and head.
func (m *MiniLM) attention(ws *workspace, seqs []seq, starts []int, par int) {
	H := m.cfg.HiddenSize
	nh := m.cfg.NumHeads
	dh := H / nh
	ld := 3 * H
	type job struct{ s, h int }
	jobs := make([]job, 0, len(seqs)*nh)
	for si := range seqs {
		for hd := 0; hd < nh; hd++ {
			jobs = append(jobs, job{si, hd})
		}
	}
	run := func(sc *attScratch, lo, hi int) {
		for _, jb := range jobs[lo:hi] {
			L := len(seqs[jb.s].ids)
			r0 := starts[jb.s]
			Lr := roundUp(L, rowAlign)
			Lc := roundUp(L, nr)
			q := ws.qkv[r0*ld+jb.h*dh:]
			k := ws.qkv[r0*ld+H+jb.h*dh:]
			v := ws.qkv[r0*ld+2*H+jb.h*dh:]
			// scores = Q·Kᵀ (query pre-scaled by 1/sqrt(dh)).
			sc.kp = packTransposed(sc.kp, k, ld, L, dh)
			sc.scores = grow(sc.scores, Lr*Lc)
			clear(sc.scores)
			gemm(Lr, 0, Lc, dh, q, ld, sc.kp, sc.scores, Lc)
			sc.inv = grow(sc.inv, L)
			for i := 0; i < L; i++ {
				sc.inv[i] = 1 / softmaxUnnorm(sc.scores[i*Lc:i*Lc+L])
			}
			// out = P·V
			sc.vp = packRowMajor(sc.vp, v, ld, dh, L)
			dhp := roundUp(dh, nr)
			sc.out = grow(sc.out, Lr*dhp)
			clear(sc.out)
			gemm(Lr, 0, dhp, L, sc.scores, Lc, sc.vp, sc.out, dhp)
			// Softmax normalisation is applied to the (narrow) output rows.
			for i := 0; i < L; i++ {
				dst := ws.ctx[(r0+i)*H+jb.h*dh : (r0+i)*H+(jb.h+1)*dh]
				inv := sc.inv[i]
				for j, v := range sc.out[i*dhp : i*dhp+dh] {
					dst[j] = v * inv
				}
			}
		}
	}
	if par <= 1 {
		run(&ws.att[0], 0, len(jobs))
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		lo, hi := w*len(jobs)/par, (w+1)*len(jobs)/par
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(&ws.att[w], lo, hi)
		}()
	}
	wg.Wait()
}

// fillBias sets the first rows rows of c (row length len(bias)) to bias.
func fillBias(c, bias []float32, rows int) {
	n := len(bias)
	for r := 0; r < rows; r++ {
		copy(c[r*n:(r+1)*n], bias)
	}
}

// addNorm computes x = LayerNorm(x + h) for the first M rows.
func addNorm(par int, x, h []float32, M, H int, g, b []float32, eps float32) {
	parFor(par, M, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*H : (r+1)*H]
			hr := h[r*H : (r+1)*H]
			for j := range xr {
				xr[j] += hr[j]
			}
			layerNorm(xr, g, b, eps)
		}
	})
}

func layerNorm(x, g, b []float32, eps float32) {
	var sum float32
	for _, v := range x {
		sum += v
	}
	mean := sum / float32(len(x))
	var vs float32
	for _, v := range x {
		d := v - mean
		vs += d * d
	}
	inv := float32(1 / math.Sqrt(float64(vs/float32(len(x))+eps)))
	for j, v := range x {
		x[j] = (v-mean)*inv*g[j] + b[j]
	}
}

// parGemm splits C += A·B across par goroutines: by column panels (the
// weights) when there are few rows, by rows otherwise.
func parGemm(par, m, n, k int, a []float32, lda int, b, c []float32, ldc int) {
	if par <= 1 {
		gemm(m, 0, n, k, a, lda, b, c, ldc)
		return
	}
	var wg sync.WaitGroup
	// Split at even panel boundaries so the 2-panel AVX-512 kernel applies.
	pairs := n / (2 * nr)
	for w := 0; w < par; w++ {
		p0, p1 := w*pairs/par*2*nr, (w+1)*pairs/par*2*nr
		if w == par-1 {
			p1 = n
		}
		if p0 == p1 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			gemm(m, p0, p1, k, a, lda, b, c, ldc)
		}()
	}
	wg.Wait()
}

// parFor runs fn over [0,n) split into par contiguous ranges.
func parFor(par, n int, fn func(lo, hi int)) {
	if par <= 1 || n < 2*par {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		lo, hi := w*n/par, (w+1)*n/par
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
