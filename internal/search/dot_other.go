//go:build !amd64 || purego

package search

// dotRows writes q·row for each dim-sized row of m to out.
func dotRows(q, m []float32, dim int, out []float32) { dotRowsGo(q, m, dim, out) }
