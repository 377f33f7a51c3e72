//go:build !purego

package search

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func dotRowsAVX2(q, m *float32, dim, rows int, out *float32)

var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotRows writes q·row for each dim-sized row of m to out, with AVX2 and
// FMA when the CPU has them (about 5× the portable loop).
func dotRows(q, m []float32, dim int, out []float32) {
	if haveAVX2 && dim > 0 && dim%32 == 0 && len(q) >= dim && len(m) >= len(out)*dim {
		if len(out) > 0 {
			dotRowsAVX2(unsafe.SliceData(q), unsafe.SliceData(m), dim, len(out), unsafe.SliceData(out))
		}
		return
	}
	dotRowsGo(q, m, dim, out)
}
