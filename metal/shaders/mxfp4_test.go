//go:build linux

package shaders

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/quant"
)

// weightTypes are the types the weight kernels are tested with: every type
// the engine computes with, and MXFP4.
var weightTypes = append(slices.Clone(ggmltest.WeightTypes), ggml.MXFP4)

// mxfp4Values are E2M1's values doubled (ggml's kvalues_mxfp4).
var mxfp4Values = [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// mxfp4Scale is 2^(e-128), the E8M0 scale halved (ggml's
// GGML_E8M0_TO_FP32_HALF): subnormal for e < 2.
func mxfp4Scale(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// dequantMXFP4 is the kernels' Go twin of MXFP4 (ggml's
// dequantize_row_mxfp4): per 17-byte block, the scale byte then 16 bytes
// whose low nibbles are elements 0..15 and high nibbles 16..31.
func dequantMXFP4(dst []float32, data []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := data[17*b : 17*b+17]
		d := mxfp4Scale(blk[0])
		for i, q := range blk[1:] {
			dst[32*b+i] = mxfp4Values[q&15] * d
			dst[32*b+i+16] = mxfp4Values[q>>4] * d
		}
	}
}

// dequantize is quant.Dequantize, with the twin for MXFP4 where the CPU
// has none yet.
func dequantize(t *testing.T, typ ggml.Type, dst []float32, data []byte) {
	t.Helper()
	if typ == ggml.MXFP4 {
		dequantMXFP4(dst, data)
		return
	}
	if err := quant.Dequantize(typ, dst, data); err != nil {
		t.Fatal(err)
	}
}

// randomWeights is ggmltest.RandomWeights, and for MXFP4 random codes with
// scales from 2^-10 to 2^2 times mag (one block in 16 at the subnormal
// scales, e 0 and 1).
func randomWeights(r *rand.Rand, typ ggml.Type, rows, cols int, mag float64) []byte {
	if typ != ggml.MXFP4 {
		return ggmltest.RandomWeights(r, typ, rows, cols, mag)
	}
	b := make([]byte, typ.RowBytes(cols)*rows)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	_, e2 := math.Frexp(mag)
	for blk := 0; blk < len(b)/17; blk++ {
		e := 128 - 10 + e2 + r.IntN(13)
		if r.IntN(16) == 0 {
			e = r.IntN(2)
		}
		b[17*blk] = byte(e)
	}
	return b
}

// The twin against the CPU's MXFP4 (engine/quant), bit for bit, once the
// CPU has it.
func TestMXFP4TwinMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := randomWeights(r, ggml.MXFP4, 8, 2880, 1)
	for i := 0; i < 256; i++ { // every scale
		data[17*i] = byte(i)
	}
	want := make([]float32, 8*2880)
	dequantMXFP4(want, data)
	got := make([]float32, len(want))
	if err := quant.Dequantize(ggml.MXFP4, got, data); err != nil {
		t.Skipf("no MXFP4 on the CPU: %v", err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d (block %d, scale byte %d): CPU %v, twin %v", i, i/32, data[17*(i/32)], got[i], want[i])
		}
	}
}
