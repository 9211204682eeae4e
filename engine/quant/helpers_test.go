package quant

import (
	"math/rand/v2"
	"nibble/internal/testdata"
	"testing"
)

func testdataDir(t testing.TB) string { return testdata.Dir(t) }

func randomVector(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}
