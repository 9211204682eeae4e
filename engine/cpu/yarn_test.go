package cpu

import (
	"math"
	"testing"

	"nibble/engine/backend"
)

// yarnReference is YaRN (Peng et al., "YaRN: Efficient Context Window
// Extension of Large Language Models") in float64, as ggml applies it: pair
// i of d rotated dims has θ_i = base^(−2i/d); its wavelength λ_i = 2π/θ_i
// turns r_i = L/λ_i times in the original context L. The pairs that turn
// more than β_fast times keep θ_i (extrapolation), those under β_slow take
// θ_i·s (interpolation, s = 1/factor), and between them the blend is linear
// in the pair index, over the index range where r_i falls from β_fast to
// β_slow (solving L·θ_i/2π = β for i), widened to whole pairs (floor, ceil).
// cos and sin gain the paper's √(1/t) = 1 + 0.1·ln(factor).
func yarnReference(x []float64, pos float64, d int, base, s, ext, betaFast, betaSlow float64, origCtx int, neox bool) []float64 {
	pairAt := func(beta float64) float64 { // i with r_i = beta
		return float64(d) * math.Log(float64(origCtx)/(2*math.Pi*beta)) / (2 * math.Log(base))
	}
	low := math.Max(0, math.Floor(pairAt(betaFast)))
	high := math.Min(float64(d-1), math.Ceil(pairAt(betaSlow)))
	mscale := 1 + 0.1*math.Log(1/s)
	out := append([]float64(nil), x...)
	for i := 0; i < d/2; i++ {
		theta := math.Pow(base, -2*float64(i)/float64(d))
		gamma := 1 - math.Min(1, math.Max(0, (float64(i)-low)/math.Max(0.001, high-low)))
		gamma *= ext
		angle := pos * (theta*s*(1-gamma) + theta*gamma)
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+d/2
		}
		c, sn := math.Cos(angle)*mscale, math.Sin(angle)*mscale
		out[a], out[b] = x[a]*c-x[b]*sn, x[a]*sn+x[b]*c
	}
	return out
}

// gpt-oss's numbers (head dim 64, base 150000, factor 32, original context
// 4096, betas 32 and 1): the ramp spans pairs 8 to 18.
func TestYaRNCorrectionDims(t *testing.T) {
	r := &backend.RoPE{Dims: 64, Base: 150000, PosScale: 1.0 / 32, ExtFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}
	if low, high := yarnCorrDims(r); low != 8 || high != 18 {
		t.Fatalf("correction dims [%g, %g], want [8, 18]", low, high)
	}
}

func TestRoPEYaRN(t *testing.T) {
	b := New(2)
	defer b.Close()
	const d, heads = 64, 2
	positions := []int32{0, 1, 7, 127, 128, 4095, 4096, 20000, 131071}
	for _, c := range []struct {
		neox           bool
		base, factor   float64
		ext, fast, slw float64
		orig           int
	}{
		{true, 150000, 32, 1, 32, 1, 4096},
		{false, 10000, 4, 1, 32, 1, 8192},
		{true, 1000000, 8, 0.5, 16, 2, 2048},
	} {
		r := &backend.RoPE{Neox: c.neox, Dims: d, Base: float32(c.base), PosScale: float32(1 / c.factor),
			ExtFactor: float32(c.ext), BetaFast: float32(c.fast), BetaSlow: float32(c.slw), OrigCtx: c.orig}
		x := b.Alloc(len(positions) * heads * d).(*Tensor)
		for i := range x.D {
			x.D[i] = float32(math.Sin(float64(i)*0.37) + 0.1)
		}
		in := append([]float32(nil), x.D...)
		b.RoPE(x, heads, d, len(positions), positions, r)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		for row, p := range positions {
			for h := 0; h < heads; h++ {
				off := (row*heads + h) * d
				src := make([]float64, d)
				for i := range src {
					src[i] = float64(in[off+i])
				}
				want := yarnReference(src, float64(p), d, c.base, 1/c.factor, c.ext, c.fast, c.slw, c.orig, c.neox)
				for i, w := range want {
					// Both take the angle in float64; float32 cos, sin and x round.
					if g := float64(x.D[off+i]); math.Abs(g-w) > 1e-5*(1+math.Abs(w)) {
						t.Fatalf("%+v position %d head %d element %d: got %g, want %g", c, p, h, i, g, w)
					}
				}
			}
		}
	}
}
