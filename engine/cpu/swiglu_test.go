package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// swiGLU (assembly on amd64) gives the bits of the Go loop, on random
// values, the ends of Exp2's range, zeros, infinities and NaN, at lengths
// that leave a tail.
func TestSwiGLUMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 86.6, 86.7, -86.6, -86.7, 88, -88, 200, -200,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30, 3.4e38, -3.4e38}
	for _, n := range []int{1, 7, 8, 37, 4096} {
		gate, up := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i] = float32(rng.NormFloat64() * 8)
			up[i] = float32(rng.NormFloat64())
			if i < len(special) {
				gate[i] = special[i]
			}
		}
		got, want := make([]float32, n), make([]float32, n)
		swiGLU(got, gate, up)
		swiGLUGo(want, gate, up)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: gate %g up %g: got %g (%#x), want %g (%#x)", n, gate[i], up[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}
