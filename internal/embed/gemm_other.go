//go:build !amd64 || purego

package embed

const (
	haveAsm    = false
	haveAVX512 = false
)

func kernel12x32(k int, a []float32, lda int, b []float32, c []float32, ldc int) bool { return false }

func kernel6x16(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	kernel6x16Go(k, a, lda, b, c, ldc)
}

func softmaxUnnorm(row []float32) float32 { return softmaxUnnormGo(row) }

func geluSlice(x []float32) {
	for i, v := range x {
		x[i] = gelu(v)
	}
}
