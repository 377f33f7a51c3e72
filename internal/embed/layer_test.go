package embed

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMatMulBothPackings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m, rows, cols = 7, 48, 32
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = rng.Float32()*2 - 1
	}
	for _, transpose := range []bool{true, false} {
		k, n := cols, rows // x·wᵀ
		if !transpose {
			k, n = rows, cols // dy·w
		}
		a := make([]float32, PaddedRows(m)*k)
		for i := range a[:m*k] {
			a[i] = rng.Float32()*2 - 1
		}
		c := make([]float32, PaddedRows(m)*n)
		MatMul(2, m, a, c, PackMatrix(w, rows, cols, transpose))
		for i := range m {
			for j := range n {
				var want float64
				for kk := range k {
					wv := w[kk*cols+j]
					if transpose {
						wv = w[j*cols+kk]
					}
					want += float64(a[i*k+kk]) * float64(wv)
				}
				if got := c[i*n+j]; math.Abs(float64(got)-want) > 1e-4 {
					t.Fatalf("transpose=%v: C[%d][%d] = %g, want %g", transpose, i, j, got, want)
				}
			}
		}
	}
}

func TestMatMulRefusesRaggedColumns(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MatMul with 20 columns did not refuse")
		}
	}()
	w := make([]float32, 20*8)
	MatMul(1, 6, make([]float32, 12*8), make([]float32, 12*20), PackMatrix(w, 20, 8, true))
}

func TestLayerUnpacksTheWeights(t *testing.T) {
	m, err := Load(modelDir(t))
	if err != nil {
		t.Fatal(err)
	}
	H, I := m.cfg.HiddenSize, m.cfg.Intermediate
	for l := 1; l <= len(m.layers); l++ {
		w, err := m.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		L := &m.layers[l-1]
		for _, c := range []struct {
			name       string
			w, packed  []float32
			rows, cols int
		}{{"qkv", w.QKV, L.qkv, 3 * H, H}, {"attention output", w.AttnOut, L.ao, H, H}, {"ff1", w.FF1, L.ff1, I, H}, {"ff2", w.FF2, L.ff2, H, I}} {
			if !slices.Equal(PackMatrix(c.w, c.rows, c.cols, true).p, c.packed) {
				t.Errorf("layer %d: %s does not pack back to the forward pass's weights", l, c.name)
			}
		}
	}
	if _, err := m.Layer(0); err == nil {
		t.Error("Layer(0) did not fail")
	}
	if _, err := m.Layer(len(m.layers) + 1); err == nil {
		t.Error("Layer past the last did not fail")
	}
}
