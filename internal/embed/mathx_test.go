package embed

import (
	"math"
	"testing"
)

func TestMathApprox(t *testing.T) {
	for x := float32(-87); x <= 20; x += 0.0137 {
		got, want := float64(expf(x)), math.Exp(float64(x))
		if math.Abs(got-want) > 4e-7*want+1e-38 {
			t.Fatalf("expf(%g)=%g want %g", x, got, want)
		}
	}
	for x := float32(-8); x <= 8; x += 0.001 {
		if got, want := float64(erff(x)), math.Erf(float64(x)); math.Abs(got-want) > 6e-7 {
			t.Fatalf("erff(%g)=%g want %g", x, got, want)
		}
	}
}

func TestVectorMath(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 37, 300} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)*1.7)) * 9
		}
		g := append([]float32(nil), x...)
		geluSlice(g)
		for i, v := range x {
			want := 0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))
			if math.Abs(float64(g[i])-want) > 2e-6*(1+math.Abs(want)) {
				t.Fatalf("n=%d gelu(%g)=%g want %g", n, v, g[i], want)
			}
		}
		s := append([]float32(nil), x...)
		sum := softmaxUnnorm(s)
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, float64(v))
		}
		var wsum float64
		for i, v := range x {
			want := math.Exp(float64(v - float32(mx)))
			wsum += want
			if math.Abs(float64(s[i])-want) > 1e-6*want+1e-30 {
				t.Fatalf("n=%d exp(%g-%g)=%g want %g", n, v, mx, s[i], want)
			}
		}
		if math.Abs(float64(sum)-wsum) > 1e-5*wsum {
			t.Fatalf("n=%d sum %g want %g", n, sum, wsum)
		}
	}
}

func TestF16(t *testing.T) {
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 5.9604645e-8, 0x8000: float32(math.Copysign(0, -1)), 0x3555: 0.33325195} {
		if got := f16table()[h]; got != want {
			t.Errorf("f16 %#04x = %g, want %g", h, got, want)
		}
	}
	if !math.IsInf(float64(f16table()[0x7c00]), 1) || !math.IsNaN(float64(f16table()[0x7e00])) {
		t.Error("inf/nan")
	}
}

func TestF32ToF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16table()[h]
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := f32ToF16(f); got != uint16(h) && !(f == 0 && got&0x7fff == 0) {
			t.Fatalf("f32ToF16(%g) = %#04x, want %#04x", f, got, h)
		}
	}
}
