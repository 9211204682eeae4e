//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

func mmName(t ggml.Type) string { return "kernel_mul_mm_" + strings.ToLower(t.String()) }

// mmTwin is kernel_mul_mm's (and kernel_mul_mm_id's) Go twin for one
// output of weights of type typ: every weight and activation rounded to
// half as the kernel's tiles hold them (F32 weights: kept float), then a
// float32 sum over the columns in order from +0. A product of two halves is
// exact in float32 (11+11 significant bits), so the kernel's fma chain over
// k rounds only the sums, as this loop does; F32's chain is fmaf32's. The
// kernel's result equals it bit for bit.
func mmTwin(typ ggml.Type, w, x []float32) float32 {
	var acc float32
	if typ == ggml.F32 {
		for c, v := range w {
			acc = fmaf32(v, x[c], acc)
		}
		return acc
	}
	for c, v := range w {
		acc += half.Round(v) * half.Round(x[c])
	}
	return acc
}

// fmaf32 is C's fmaf: a·b + c rounded once to float32. The product is
// exact in float64; the float64 sum's own rounding error (TwoSum) decides
// the one case where rounding that sum again to float32 could differ, a sum
// exactly halfway between two floats.
func fmaf32(a, b, c float32) float32 {
	p, cf := float64(a)*float64(b), float64(c)
	s := p + cf
	bv := s - p
	e := (p - (s - bv)) + (cf - bv)
	r := float32(s)
	if e == 0 || float64(r) == s {
		return r
	}
	lo, hi := r, r
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if s != (float64(lo)+float64(hi))/2 {
		return r
	}
	if e > 0 {
		return hi
	}
	return lo
}

// mmTolerance bounds the kernel (and its twin) against the float64 product
// of the unrounded operands, relative to Σ|w·x| of an output: each product
// carries the two roundings to half (2^-11 each, relative; none for F32)
// and the float32 sum over up to 5120 terms adds 1e-5 (the backend
// conformance suite's bound for F32). Below half's normal range (2^-14) the rounding is absolute, at
// most 2^-25: mmFloor·Σ(|w|+|x|) more covers it (MXFP4's subnormal scales
// become zero). It checks that the twin is the product it claims to be.
func mmTolerance(typ ggml.Type) float64 {
	if typ == ggml.F32 {
		return 1e-5
	}
	return 0x1p-10 + 1e-5
}

const mmFloor = 0x1p-24

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
		Inline:  []device.Inline{{Index: 0, Data: encoder.MulMMArgs{Cols: uint32(c.cols), Outs: uint32(c.outs), Rows: uint32(c.rows), WStride: uint32(c.typ.RowBytes(c.cols)), XStride: uint32(xStride), DStride: uint32(dStride)}.Bytes()}},
		Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, w)}, {Index: 2, Buffer: buffer(t, d, xb)}, {Index: 3, Buffer: dst}},
	})
	got := make([]float32, c.rows*c.outs)
	for r := 0; r < c.rows; r++ {
		copy(got[r*c.outs:], f32s(dst.Bytes()[r*dStride:r*dStride+4*c.outs]))
	}
	return got
}

// kernel_mul_mm_<type> against its twin, mmTwin on the dequantized weights
// (quant.Dequantize, the CPU backend's formats) and x: equal bit for bit;
// and both against the float64 product within mmTolerance·Σ|w·x| per
// output (plus mmFloor·Σ(|w|+|x|)). The CPU backend's own MatMul quantizes x to q8 for the quantized
// types, a larger error than the kernel's half; the encoder test compares
// with it.
func TestMulMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var cases []mmCase
	for _, typ := range weightTypes {
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
		w := randomWeights(rng, c.typ, c.outs, c.cols, 1)
		wf := make([]float32, c.outs*c.cols)
		dequantize(t, c.typ, wf, w)
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
						var want, sumAbs, sumOps float64
						for j, v := range wf[k*c.cols : (k+1)*c.cols] {
							p := float64(v) * float64(xr[j])
							want += p
							sumAbs += math.Abs(p)
							sumOps += math.Abs(float64(v)) + math.Abs(float64(xr[j]))
						}
						g := got[r*c.outs+k]
						if twin := mmTwin(c.typ, wf[k*c.cols:(k+1)*c.cols], xr); math.Float32bits(g) != math.Float32bits(twin) {
							t.Fatalf("row %d output %d: %v, twin %v", r, k, g, twin)
						}
						tol := mmTolerance(c.typ)*sumAbs + mmFloor*sumOps
						e := math.Abs(float64(g) - want)
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
	for _, typ := range weightTypes {
		fmt.Fprintf(&line, " %v %.3f", typ, worst[typ])
	}
	t.Logf("largest error/tolerance:%s", line.String())
}
