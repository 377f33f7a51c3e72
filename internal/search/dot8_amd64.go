//go:build !purego

package search

import "unsafe"

//go:noescape
func dotRowsI8AVX2(q *int16, m *int8, dim, rows int, out *int32)

// dotRowsI8 writes q·row for each dim-sized int8 row of m to out, with
// AVX2 when the CPU has it.
func dotRowsI8(q []int16, m []int8, dim int, out []int32) {
	if haveAVX2 && dim > 0 && dim%32 == 0 && len(q) >= dim && len(m) >= len(out)*dim {
		if len(out) > 0 {
			dotRowsI8AVX2(unsafe.SliceData(q), unsafe.SliceData(m), dim, len(out), unsafe.SliceData(out))
		}
		return
	}
	dotRowsI8Go(q, m, dim, out)
}
