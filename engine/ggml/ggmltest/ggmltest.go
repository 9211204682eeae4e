// Package ggmltest makes tensors of every ggml type the engine computes with,
// for tests of the engine's kernels (engine/quant, the backend contract in
// engine/backend/backendtest, the Metal shaders). It imports only ggml and
// half, so engine/quant's own tests can use it.
package ggmltest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

// WeightTypes is every tensor type the engine computes with.
var WeightTypes = []ggml.Type{
	ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
	ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
}

// ScaleOffsets are the byte offsets of a block's fp16 scales (ggml's block
// structs) for each block-quantized type.
var ScaleOffsets = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
}

// RandomWeights returns rows×cols elements of t. Floats (f32, f16, bf16) are
// normal with standard deviation mag. Quantized blocks get random quant bits,
// so every bit pattern of the block format occurs, and finite fp16 scales
// (those at ScaleOffsets) of random size around mag/16 and either sign, so
// every dequantized value is finite. MXFP4 blocks get an E8M0 scale byte
// that puts their largest codes near mag.
func RandomWeights(rng *rand.Rand, t ggml.Type, rows, cols int, mag float64) []byte {
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
	if t == ggml.MXFP4 {
		// The E8M0 scale byte: 2^(e−128) times codes up to 12 lands near mag.
		for blk := 0; blk < len(b)/ts; blk++ {
			e := 128 + math.Round(math.Log2(mag*(0.01+rng.Float64())/8))
			b[blk*ts] = byte(min(max(e, 1), 254))
		}
		return b
	}
	for blk := 0; blk < len(b)/ts; blk++ {
		for _, off := range ScaleOffsets[t] {
			v := float32(mag * (0.01 + rng.Float64()) / 16)
			if rng.IntN(4) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(b[blk*ts+off:], half.FromFloat32(v))
		}
	}
	return b
}
