//go:build !purego

package embed

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func gemm6x16(k int, a *float32, lda int, b *float32, c *float32, ldc int)

//go:noescape
func gemm12x32(k int, a *float32, lda int, b *float32, c *float32, ldc int)

var (
	haveAsm    = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	haveAVX512 = haveAsm && cpu.X86.HasAVX512F
)

// kernel12x32 computes C[0:12][0:32] += A[0:12][0:k] · (two panels at b).
// It reports false when the CPU lacks AVX-512 (or asm is disabled).
func kernel12x32(k int, a []float32, lda int, b []float32, c []float32, ldc int) bool {
	if !haveAVX512 || !useAsm || !useAVX512 {
		return false
	}
	gemm12x32(k, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
	return true
}

// kernel6x16 computes C[0:6][0:16] += A[0:6][0:k] · Bpanel[0:k][0:16].
// Bounds are checked by the caller (gemm).
func kernel6x16(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	if haveAsm && useAsm {
		gemm6x16(k, unsafe.SliceData(a), lda, unsafe.SliceData(b), unsafe.SliceData(c), ldc)
		return
	}
	kernel6x16Go(k, a, lda, b, c, ldc)
}

//go:noescape
func expSubSum(x *float32, n int, mx float32) float32

//go:noescape
func maxVec(x *float32, n int) float32

//go:noescape
func geluVec(x *float32, n int)

// softmaxUnnorm sets row[i] = exp(row[i]-max(row)) and returns the sum.
func softmaxUnnorm(row []float32) float32 {
	n8 := len(row) &^ 7
	if !haveAsm || !useAsm || n8 == 0 {
		return softmaxUnnormGo(row)
	}
	mx := maxVec(unsafe.SliceData(row), n8)
	for _, v := range row[n8:] {
		mx = max(mx, v)
	}
	sum := expSubSum(unsafe.SliceData(row), n8, mx)
	for i, v := range row[n8:] {
		e := expf(v - mx)
		row[n8+i] = e
		sum += e
	}
	return sum
}

// geluSlice applies GELU in place.
func geluSlice(x []float32) {
	n8 := len(x) &^ 7
	if haveAsm && useAsm && n8 > 0 {
		geluVec(unsafe.SliceData(x), n8)
		x = x[n8:]
	}
	for i, v := range x {
		x[i] = gelu(v)
	}
}
