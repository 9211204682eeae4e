package quant

import (
	"math/rand/v2"
	"slices"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/internal/testdata"
)

// testWeightTypes is every type this package computes with: the shared list
// and MXFP4, which the GPU kernels may not have yet.
var testWeightTypes = func() []ggml.Type {
	ts := slices.Clone(ggmltest.WeightTypes)
	if !slices.Contains(ts, ggml.MXFP4) {
		ts = append(ts, ggml.MXFP4)
	}
	return ts
}()

func testdataDir(t testing.TB) string { return testdata.Dir(t) }

func randomVector(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}
