package search

// dot is the inner product of two equal-length vectors. Eight independent
// accumulators let the CPU overlap the multiply-adds.
func dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// dotRowsGo writes q·row for each dim-sized row of m to out.
func dotRowsGo(q, m []float32, dim int, out []float32) {
	for r := range out {
		out[r] = dot(q, m[r*dim:(r+1)*dim])
	}
}
