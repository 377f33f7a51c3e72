package embed

import "fmt"

// Layer holds copies of one transformer layer's weights, for code that
// trains something on top of the model (bench/poisoning's adapters) and
// must run the layer itself. Matrices are row-major [out][in], as in the
// checkpoint; the query rows and bias are already scaled by 1/sqrt(head
// dimension), as the forward pass uses them.
type Layer struct {
	Heads int
	// QKV stacks the query, key and value weights: 3·hidden rows.
	QKV, QKVBias         []float32
	AttnOut, AttnOutBias []float32
	LN1Gain, LN1Bias     []float32
	FF1, FF1Bias         []float32 // intermediate rows
	FF2, FF2Bias         []float32 // hidden rows of intermediate inputs
	LN2Gain, LN2Bias     []float32
	LayerNormEps         float32
	Hidden, Intermediate int
}

// Layer returns the weights of layer l (1-based).
func (m *MiniLM) Layer(l int) (*Layer, error) {
	if l < 1 || l > len(m.layers) {
		return nil, fmt.Errorf("embed: layer %d out of range 1..%d", l, len(m.layers))
	}
	H, I := m.cfg.HiddenSize, m.cfg.Intermediate
	L := &m.layers[l-1]
	return &Layer{
		Heads: m.cfg.NumHeads, Hidden: H, Intermediate: I, LayerNormEps: float32(m.cfg.LayerNormEps),
		QKV: unpackTransposed(L.qkv, 3*H, H), QKVBias: clone(L.qkvB),
		AttnOut: unpackTransposed(L.ao, H, H), AttnOutBias: clone(L.aoB),
		LN1Gain: clone(L.ln1g), LN1Bias: clone(L.ln1b),
		FF1: unpackTransposed(L.ff1, I, H), FF1Bias: clone(L.ff1B),
		FF2: unpackTransposed(L.ff2, H, I), FF2Bias: clone(L.ff2B),
		LN2Gain: clone(L.ln2g), LN2Bias: clone(L.ln2b),
	}, nil
}

func clone(s []float32) []float32 { return append([]float32(nil), s...) }

// unpackTransposed inverts packTransposed: it returns the n×k row-major
// matrix src whose transpose was packed.
func unpackTransposed(p []float32, n, k int) []float32 {
	out := make([]float32, n*k)
	for j := range n {
		panel := p[j/nr*nr*k:]
		for kk := range k {
			out[j*k+kk] = panel[kk*nr+j%nr]
		}
	}
	return out
}

// Matrix is the right-hand factor of MatMul, packed for the micro-kernels.
type Matrix struct {
	p    []float32
	n, k int
}

// PackMatrix packs w (rows×cols, row-major) as B = wᵀ (k = cols, n = rows;
// a layer's weights, for x·wᵀ) when transpose is set, else as B = w
// (k = rows, n = cols; for the backward product dy·w).
func PackMatrix(w []float32, rows, cols int, transpose bool) *Matrix {
	if transpose {
		return &Matrix{p: packTransposed(nil, w, cols, rows, cols), n: rows, k: cols}
	}
	return &Matrix{p: packRowMajor(nil, w, cols, cols, rows), n: cols, k: rows}
}

// PaddedRows is the number of rows MatMul's A and C must hold for m rows:
// the products run on whole tiles and read and write past the last row.
func PaddedRows(m int) int { return roundUp(m, rowAlign) }

// MatMul computes C (m×n) += A (m×k) · B on par goroutines. A and C are
// row-major with rows of k and n floats and at least PaddedRows(m) rows;
// n must be a multiple of 16.
func MatMul(par, m int, a, c []float32, b *Matrix) {
	if b.n%nr != 0 {
		panic(fmt.Sprintf("embed: MatMul needs n a multiple of %d, have %d", nr, b.n))
	}
	parGemm(par, PaddedRows(m), b.n, b.k, a, b.k, b.p, c, b.n)
}
