package embed

import "math"

// expf is a fast float32 e^x (relative error ~2e-7 on the range used by
// softmax, x <= 0). Inputs below -87 return 0.
func expf(x float32) float32 {
	if x < -87 {
		return 0
	}
	if x > 88 {
		return float32(math.Inf(1))
	}
	// e^x = 2^n · e^r, n = round(x/ln2), r = x - n·ln2 ∈ [-ln2/2, ln2/2].
	n := float32(math.Floor(float64(x*1.44269504088896341 + 0.5)))
	r := x - n*0.693145751953125 - n*1.428606765330187045e-06
	// Minimax-ish polynomial for e^r on [-0.35, 0.35] (Cephes expf).
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// gelu is the exact (erf-based) GELU used by BERT: x·Φ(x).
func gelu(x float32) float32 {
	return 0.5 * x * (1 + erff(x*0.70710678118654752))
}

// erff approximates erf with Abramowitz & Stegun 7.1.26 refined to float32
// accuracy (max absolute error ~5e-7 in float32).
func erff(x float32) float32 {
	sign := float32(1)
	if x < 0 {
		sign, x = -1, -x
	}
	if x > 4 {
		return sign
	}
	t := 1 / (1 + 0.3275911*x)
	y := 1 - (((((1.061405429*t-1.453152027)*t)+1.421413741)*t-0.284496736)*t+0.254829592)*t*expf(-x*x)
	return sign * y
}

func softmaxUnnormGo(row []float32) float32 {
	mx := row[0]
	for _, v := range row[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range row {
		e := expf(v - mx)
		row[i] = e
		sum += e
	}
	return sum
}
