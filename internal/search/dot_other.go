//go:build !amd64 || purego

package search

// dotRows writes q·row for each dim-sized row of m to out.
func dotRows(q, m []float32, dim int, out []float32) { dotRowsGo(q, m, dim, out) }

// dotRowsI8 writes q·row for each dim-sized int8 row of m to out.
func dotRowsI8(q []int16, m []int8, dim int, out []int32) { dotRowsI8Go(q, m, dim, out) }
