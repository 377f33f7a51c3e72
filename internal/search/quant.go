package search

import "math"

// quantise writes v as int8 with one scale per vector (v ≈ scale·q) and
// returns the scale: the largest magnitude maps to ±127. Cosine scores
// from these rows are within about 0.01 of the exact ones, enough to pick
// the candidates that are then rescored exactly.
func quantise(v []float32, q []int8) float32 {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	if m == 0 {
		clear(q[:len(v)])
		return 0
	}
	s := m / 127
	inv := 1 / s
	for i, x := range v {
		q[i] = int8(math.Round(float64(x * inv)))
	}
	return s
}

// quantiseQuery is quantise into int16 lanes, the form the int8 kernel
// multiplies with.
func quantiseQuery(v []float32) ([]int16, float32) {
	q8 := make([]int8, len(v))
	s := quantise(v, q8)
	out := make([]int16, len(v))
	for i, x := range q8 {
		out[i] = int16(x)
	}
	return out, s
}

// dotRowsI8Go writes q·row for each dim-sized int8 row of m to out.
func dotRowsI8Go(q []int16, m []int8, dim int, out []int32) {
	for r := range out {
		row := m[r*dim : (r+1)*dim]
		var s0, s1, s2, s3 int32
		i := 0
		for ; i+4 <= dim; i += 4 {
			s0 += int32(q[i]) * int32(row[i])
			s1 += int32(q[i+1]) * int32(row[i+1])
			s2 += int32(q[i+2]) * int32(row[i+2])
			s3 += int32(q[i+3]) * int32(row[i+3])
		}
		for ; i < dim; i++ {
			s0 += int32(q[i]) * int32(row[i])
		}
		out[r] = s0 + s1 + s2 + s3
	}
}
