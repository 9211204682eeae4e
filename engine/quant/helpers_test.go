package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"nibble/internal/testdata"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

func testdataDir(t testing.TB) string { return testdata.Dir(t) }

var allTypes = []ggml.Type{
	ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
	ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
}

// scaleOffsets are the byte offsets of the fp16 scale fields in a block.
var scaleOffsets = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
}

// randomWeights returns rows×cols elements of type t: random quant bits and
// finite scales of random size and sign (magnitude around mag), so every
// code path sees every bit pattern.
func randomWeights(rng *rand.Rand, t ggml.Type, rows, cols int, mag float64) []byte {
	n := rows * cols
	b := make([]byte, t.RowBytes(cols)*rows)
	switch t {
	case ggml.F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64()*mag)))
		}
		return b
	case ggml.F16, ggml.BF16:
		for i := 0; i < n; i++ {
			v := float32(rng.NormFloat64() * mag)
			h := half.FromFloat32(v)
			if t == ggml.BF16 {
				h = half.BF16FromFloat32(v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	ts := t.TypeSize()
	for blk := 0; blk < len(b)/ts; blk++ {
		for _, off := range scaleOffsets[t] {
			v := float32(mag * (0.01 + rng.Float64()) / 16)
			if rng.IntN(4) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(b[blk*ts+off:], half.FromFloat32(v))
		}
	}
	return b
}

func randomVector(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}
