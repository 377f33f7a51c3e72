package embed

import "fmt"

// Matrix products: C (m×n) += A (m×k) · B (k×n). A and C are row-major
// slices with explicit row strides; B is "packed": split into panels of nr
// consecutive columns, each panel stored k-major (nr floats per k), so the
// micro-kernel streams it linearly. m must be a multiple of mr (callers pad
// their row buffers) and n a multiple of nr (packers zero-pad).

const (
	mr = 6  // rows per micro-kernel tile
	nr = 16 // columns per packed panel
	// rowAlign is the row padding every activation buffer gets, so that
	// gemm may read and write whole mr-row tiles past the last real row.
	rowAlign = 12
)

// useAsm and useAVX512 can be cleared by tests (and benchmarks) to
// exercise the portable or AVX2 kernels.
var useAsm, useAVX512 = true, true

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// packTransposed packs B where B[kk][j] = src[j*ld+kk] for j < n, kk < k
// (e.g. a PyTorch Linear weight [out][in], or the keys of an attention head).
func packTransposed(dst, src []float32, ld, n, k int) []float32 {
	np := roundUp(n, nr)
	dst = grow(dst, np*k)
	for p := 0; p < np; p += nr {
		panel := dst[p*k : (p+nr)*k]
		for jj := 0; jj < nr; jj++ {
			j := p + jj
			if j >= n {
				for kk := 0; kk < k; kk++ {
					panel[kk*nr+jj] = 0
				}
				continue
			}
			row := src[j*ld : j*ld+k]
			for kk, v := range row {
				panel[kk*nr+jj] = v
			}
		}
	}
	return dst
}

// packRowMajor packs B where B[kk][j] = src[kk*ld+j] for j < n, kk < k
// (e.g. the values of an attention head).
func packRowMajor(dst, src []float32, ld, n, k int) []float32 {
	np := roundUp(n, nr)
	dst = grow(dst, np*k)
	for p := 0; p < np; p += nr {
		panel := dst[p*k : (p+nr)*k]
		w := min(nr, n-p)
		for kk := 0; kk < k; kk++ {
			out := panel[kk*nr : kk*nr+nr]
			copy(out, src[kk*ld+p:kk*ld+p+w])
			clear(out[w:])
		}
	}
	return dst
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// gemm computes C += A·B for rows [0,m) and packed-panel columns [n0,n1).
func gemm(m, n0, n1, k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	if m%mr != 0 || n0%nr != 0 || n1%nr != 0 || k < 1 ||
		len(a) < (m-1)*lda+k || len(c) < (m-1)*ldc+n1 || len(b) < n1*k {
		panic(fmt.Sprintf("embed: gemm bounds m=%d n=[%d,%d) k=%d len(a)=%d lda=%d len(b)=%d len(c)=%d ldc=%d",
			m, n0, n1, k, len(a), lda, len(b), len(c), ldc))
	}
	// Block rows so a chunk of A stays in L2 while all panels stream by.
	chunk := max(2*mr, (96*1024/(4*k))/(2*mr)*(2*mr))
	for i0 := 0; i0 < m; i0 += chunk {
		i1 := min(m, i0+chunk)
		p := n0
		if (i1-i0)%(2*mr) == 0 {
			// Two panels × 12 rows at a time with AVX-512.
			for ; p+2*nr <= n1; p += 2 * nr {
				bp := b[p*k : (p+2*nr)*k]
				if !kernel12x32(k, a[i0*lda:], lda, bp, c[i0*ldc+p:], ldc) {
					break
				}
				for i := i0 + 2*mr; i < i1; i += 2 * mr {
					kernel12x32(k, a[i*lda:], lda, bp, c[i*ldc+p:], ldc)
				}
			}
		}
		for ; p < n1; p += nr {
			bp := b[p*k : (p+nr)*k]
			for i := i0; i < i1; i += mr {
				kernel6x16(k, a[i*lda:], lda, bp, c[i*ldc+p:], ldc)
			}
		}
	}
}

// kernel6x16Go is the portable micro-kernel.
func kernel6x16Go(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	var acc [mr][nr]float32
	for kk := 0; kk < k; kk++ {
		bk := (*[nr]float32)(b[kk*nr : kk*nr+nr])
		for r := 0; r < mr; r++ {
			av := a[r*lda+kk]
			row := &acc[r]
			for j := range row {
				row[j] += av * bk[j]
			}
		}
	}
	for r := 0; r < mr; r++ {
		row := c[r*ldc : r*ldc+nr]
		for j := range row {
			row[j] += acc[r][j]
		}
	}
}
