//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/quant"
	"nibble/metal/device"
)

// mmScaleOffsets are the byte offsets of a block's fp16 scales (ggml's block
// structs), set to finite values so that every dequantized value is finite.
var mmScaleOffsets = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
}

// mmRandomWeights returns rows×cols elements of t: normal values for the
// float types; for the quantized ones random bits (every code pattern of the
// format occurs) with finite scales of random size and sign.
func mmRandomWeights(rng *rand.Rand, t ggml.Type, rows, cols int) []byte {
	n := rows * cols
	b := make([]byte, t.RowBytes(cols)*rows)
	switch t {
	case ggml.F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return b
	case ggml.F16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], half.FromFloat32(float32(rng.NormFloat64())))
		}
		return b
	case ggml.BF16:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[2*i:], half.BF16FromFloat32(float32(rng.NormFloat64())))
		}
		return b
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	ts := t.TypeSize()
	for blk := 0; blk < len(b)/ts; blk++ {
		for _, off := range mmScaleOffsets[t] {
			v := float32((0.01 + rng.Float64()) / 32)
			if rng.IntN(4) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(b[blk*ts+off:], half.FromFloat32(v))
		}
	}
	return b
}

// mmTypes are the weight types with a kernel_mul_mm_<type>.
var mmTypes = []ggml.Type{
	ggml.F32, ggml.F16, ggml.BF16, ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
	ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
}

func mmName(t ggml.Type) string { return "kernel_mul_mm_" + strings.ToLower(t.String()) }

// mmTolerance is the kernel's error bound relative to Σ|w·x| of an output.
// The W tile is half for every type but F32 and BF16, so a dequantized
// quantized weight is rounded once to half (unit roundoff 2^-11 ≈ 4.9e-4);
// F16 values are exact in it. Then float32 accumulation over up to 5120
// terms: 1e-5 (the backend conformance suite's bound for F32).
func mmTolerance(t ggml.Type) float64 {
	switch t {
	case ggml.F32, ggml.F16, ggml.BF16:
		return 1e-5
	}
	return 5e-4 + 1e-5
}

// mmCase is one matrix product: W outs×cols of typ, batch rows of x.
type mmCase struct {
	typ              ggml.Type
	cols, outs, rows int
}

// runMulMM runs kernel_mul_mm_<typ> on W and x in order o. x and dst rows
// are padded (strides larger than the rows) to check the strides.
func runMulMM(t *testing.T, c mmCase, w []byte, x []float32, o int) []float32 {
	d, l := emu(t)
	p := pipeline(t, l, mmName(c.typ))
	xStride := 4*c.cols + 16
	dStride := 4*c.outs + 32
	xb := make([]byte, xStride*c.rows)
	for r := 0; r < c.rows; r++ {
		copy(xb[r*xStride:], f32Bytes(x[r*c.cols:(r+1)*c.cols]))
	}
	dst := buffer(t, d, make([]byte, dStride*c.rows))
	run(t, d, orders[o], device.Dispatch{
		Pipeline: p, Groups: [3]int{(c.rows + 31) / 32, (c.outs + 63) / 64, 1}, Threads: [3]int{128, 1, 1},
		Inline:  []device.Inline{{Index: 0, Data: args(c.cols, c.outs, c.rows, c.typ.RowBytes(c.cols), xStride, dStride)}},
		Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, w)}, {Index: 2, Buffer: buffer(t, d, xb)}, {Index: 3, Buffer: dst}},
	})
	got := make([]float32, c.rows*c.outs)
	for r := 0; r < c.rows; r++ {
		copy(got[r*c.outs:], f32s(dst.Bytes()[r*dStride:r*dStride+4*c.outs]))
	}
	return got
}

// kernel_mul_mm_<type> against the float64 product of the dequantized
// weights (quant.Dequantize, the CPU backend's formats) and x. The CPU
// backend's own MatMul quantizes x to q8 for the quantized types, a larger
// error than the kernel's; the encoder test compares with it. Tolerance:
// mmTolerance·Σ|w·x| per output.
func TestMulMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var cases []mmCase
	for _, typ := range mmTypes {
		// Every type on small shapes (cols a multiple of its block, 2080
		// and 2304 not powers of two); outputs and rows that are not
		// multiples of the tiles.
		cols := []int{64, 2080}
		if typ.BlockSize() == ggml.QK_K {
			cols = []int{256, 2304}
		}
		cases = append(cases, mmCase{typ, cols[0], 100, 2}, mmCase{typ, cols[1], 33, 17}, mmCase{typ, cols[0], 1, 3})
	}
	// The required types on the engine's larger shapes.
	cases = append(cases,
		mmCase{ggml.F16, 5120, 64, 33},
		mmCase{ggml.Q8_0, 512, 1000, 32},
		mmCase{ggml.Q4_0, 4096, 100, 100},
		mmCase{ggml.Q4_K, 5120, 130, 33},
		mmCase{ggml.Q6_K, 1024, 257, 65},
		mmCase{ggml.F32, 128, 70, 100},
		mmCase{ggml.Q4_K, 256, 64, 512}, // the largest prefill batch
	)
	worst := map[ggml.Type]float64{}
	for _, c := range cases {
		w := mmRandomWeights(rng, c.typ, c.outs, c.cols)
		wf := make([]float32, c.outs*c.cols)
		if err := quant.Dequantize(c.typ, wf, w); err != nil {
			t.Fatal(err)
		}
		x := make([]float32, c.rows*c.cols)
		for j := range x {
			x[j] = float32(rng.NormFloat64())
		}
		for o := range orders {
			t.Run(fmt.Sprintf("%v_cols%d_outs%d_rows%d_%v", c.typ, c.cols, c.outs, c.rows, orders[o]), func(t *testing.T) {
				got := runMulMM(t, c, w, x, o)
				for r := 0; r < c.rows; r++ {
					xr := x[r*c.cols : (r+1)*c.cols]
					for k := 0; k < c.outs; k++ {
						var want, sumAbs float64
						for j, v := range wf[k*c.cols : (k+1)*c.cols] {
							p := float64(v) * float64(xr[j])
							want += p
							sumAbs += math.Abs(p)
						}
						tol := mmTolerance(c.typ) * sumAbs
						e := math.Abs(float64(got[r*c.outs+k]) - want)
						worst[c.typ] = math.Max(worst[c.typ], e/tol)
						if !(e <= tol) {
							t.Fatalf("row %d output %d: %v, want %v (error %.3g > %.3g)", r, k, got[r*c.outs+k], want, e, tol)
						}
					}
				}
			})
		}
	}
	var line strings.Builder
	for _, typ := range mmTypes {
		fmt.Fprintf(&line, " %v %.3f", typ, worst[typ])
	}
	t.Logf("largest error/tolerance:%s", line.String())
}
