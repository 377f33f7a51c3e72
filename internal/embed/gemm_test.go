package embed

import (
	"math"
	"math/rand/v2"
	"testing"
)

func naiveMatMul(m, n, k int, a []float32, lda int, bt []float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for kk := 0; kk < k; kk++ {
				s += float64(a[i*lda+kk]) * float64(bt[j*k+kk])
			}
			c[i*ldc+j] += float32(s)
		}
	}
}

func TestGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	defer func() { useAsm, useAVX512 = true, true }()
	for mode := 0; mode < 3; mode++ {
		if mode > 0 && !haveAsm || mode == 2 && !haveAVX512 {
			continue
		}
		useAsm, useAVX512 = mode > 0, mode == 2
		asm := mode
		for _, dims := range [][3]int{{6, 16, 1}, {12, 32, 7}, {18, 48, 384}, {6, 20, 33}, {24, 80, 5}, {96, 384, 1536}} {
			m, n, k := dims[0], dims[1], dims[2]
			lda, ldc := k+3, roundUp(n, nr)+5
			a := make([]float32, m*lda)
			bt := make([]float32, n*k)
			for i := range a {
				a[i] = rng.Float32()*2 - 1
			}
			for i := range bt {
				bt[i] = rng.Float32()*2 - 1
			}
			packed := packTransposed(nil, bt, k, n, k)
			c := make([]float32, m*ldc)
			want := make([]float32, m*ldc)
			for i := range c {
				c[i] = float32(i % 7)
				want[i] = c[i]
			}
			gemm(m, 0, roundUp(n, nr), k, a, lda, packed, c, ldc)
			naiveMatMul(m, n, k, a, lda, bt, want, ldc)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					if d := math.Abs(float64(c[i*ldc+j] - want[i*ldc+j])); d > 1e-3 {
						t.Fatalf("mode=%d m=%d n=%d k=%d: C[%d][%d]=%g want %g", asm, m, n, k, i, j, c[i*ldc+j], want[i*ldc+j])
					}
				}
			}
			// packRowMajor of B (k×n row-major) must equal packTransposed of Bᵀ.
			b := make([]float32, k*n)
			for kk := 0; kk < k; kk++ {
				for j := 0; j < n; j++ {
					b[kk*n+j] = bt[j*k+kk]
				}
			}
			p2 := packRowMajor(nil, b, n, n, k)
			for i := range packed {
				if packed[i] != p2[i] {
					t.Fatalf("packRowMajor differs at %d", i)
				}
			}
		}
	}
}

func BenchmarkGemmAVX2(b *testing.B) {
	useAVX512 = false
	defer func() { useAVX512 = true }()
	BenchmarkGemm(b)
}

func BenchmarkGemm(b *testing.B) {
	m, n, k := 96, 1536, 384
	a := make([]float32, m*k)
	w := make([]float32, n*k)
	for i := range a {
		a[i] = 0.5
	}
	packed := packTransposed(nil, w, k, n, k)
	c := make([]float32, m*n)
	b.ResetTimer()
	for range b.N {
		gemm(m, 0, n, k, a, k, packed, c, n)
	}
	b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
