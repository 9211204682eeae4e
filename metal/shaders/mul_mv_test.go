//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// mulMVCase is one shape: W rows×cols, xrows rows of x, nx rows of x per
// threadgroup (the function constant), on a GPU of cores cores
// (encoder.MatVecGrid: 8 keeps a set's rows on one simdgroup, 1000 splits
// them between up to 8 where the row has the chunks).
type mulMVCase struct{ cols, rows, xrows, nx, cores int }

func mulMVCases(t ggml.Type) []mulMVCase {
	cs := []mulMVCase{
		{256, 1, 1, 1, 8}, {256, 7, 3, 3, 8}, {768, 100, 5, 4, 8}, {5120, 33, 2, 2, 1000}, {2048, 1000, 1, 1, 8},
		{2048, 37, 1, 1, 1000}, {1024, 5, 3, 3, 1000},
	}
	if t.BlockSize() < ggml.QK_K {
		cs = append(cs, mulMVCase{64, 7, 1, 1, 8}, mulMVCase{2080, 100, 4, 4, 1000}, mulMVCase{96, 9, 5, 2, 8})
	}
	switch t {
	case ggml.F16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_K, ggml.Q6_K:
		cs = append(cs, mulMVCase{8192, 40, 1, 1, 8}, mulMVCase{8192, 19, 1, 1, 1000})
	}
	return cs
}

// mulMVRef is the exact product of the dequantized W and x, in float64, and
// Σ|w||x| per output (the tolerance's scale). The CPU backend's twin
// (quant.MatMul) rounds x to q8 or fp16 first for most types, so it is not
// the reference of a kernel that keeps x in f32.
func mulMVRef(wf, x []float32, rows, cols, xrows int) (want, scale []float64) {
	want = make([]float64, rows*xrows)
	scale = make([]float64, rows*xrows)
	for y := 0; y < xrows; y++ {
		xr := x[y*cols : (y+1)*cols]
		for r := 0; r < rows; r++ {
			var s, a float64
			for i, w := range wf[r*cols : (r+1)*cols] {
				p := float64(w) * float64(xr[i])
				s += p
				a += math.Abs(p)
			}
			want[y*rows+r], scale[y*rows+r] = s, a
		}
	}
	return want, scale
}

// kernel_mul_mv_<type> for every weight type against the float64 product.
// Tolerance: 1e-6·Σ|w||x| per output (float32 accumulation of up to 8192
// products in lane then simd order, about 16 float32 roundings deep, each
// 16-element chunk as a·(q·x) + m·Σx from its codes q). The worst case seen
// is under 10% of it.
func TestMulMV(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range weightTypes {
		worst := 0.0
		for _, c := range mulMVCases(typ) {
			data := randomWeights(r, typ, c.rows, c.cols, 0.5)
			wf := make([]float32, c.rows*c.cols)
			dequantize(t, typ, wf, data)
			x := make([]float32, c.xrows*c.cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			want, scale := mulMVRef(wf, x, c.rows, c.cols, c.xrows)
			p, err := l.Pipeline("kernel_mul_mv_"+encoder.KernelSuffix(typ), device.Constant{Index: 600, Value: int16(c.nx)})
			if err != nil {
				t.Fatal(err)
			}
			g := encoder.MatVecGrid(typ, c.rows, c.cols, (c.xrows+c.nx-1)/c.nx, c.cores, encoder.MatVecSimdgroupsPerCore)
			for _, o := range orders {
				t.Run(fmt.Sprintf("%s_%dx%d_x%d_nx%d_sets%d_split%d_%v", typ, c.rows, c.cols, c.xrows, c.nx, g.Sets, g.Split, o), func(t *testing.T) {
					// Rows of dst 16 bytes apart, to see that nothing past a
					// row is written.
					dStride := 4*c.rows + 16
					dst := buffer(t, d, make([]byte, dStride*c.xrows))
					xb := buffer(t, d, f32Bytes(x))
					run(t, d, o, device.Dispatch{
						Pipeline:    p,
						Groups:      [3]int{g.Groups, (c.xrows + c.nx - 1) / c.nx, 1},
						Threads:     [3]int{g.Threads(), 1, 1},
						Threadgroup: []int{g.ThreadgroupBytes(c.nx, false)},
						Inline: []device.Inline{{Index: 0, Data: encoder.MulMVArgs{Cols: uint32(c.cols), Rows: uint32(c.rows), XRows: uint32(c.xrows),
							WStride: uint32(typ.RowBytes(c.cols)), XStride: uint32(4 * c.cols), DStride: uint32(dStride), Split: uint32(g.Split)}.Bytes()}},
						Buffers: []device.Binding{
							{Index: 1, Buffer: buffer(t, d, data)}, {Index: 2, Buffer: xb}, {Index: 3, Buffer: dst}, {Index: 4, Buffer: xb},
						},
					})
					for y := 0; y < c.xrows; y++ {
						row := dst.Bytes()[y*dStride : (y+1)*dStride]
						got := f32s(row[:4*c.rows])
						for i, v := range got {
							k := y*c.rows + i
							e := math.Abs(float64(v) - want[k])
							tol := 1e-6 * scale[k]
							worst = math.Max(worst, e/tol)
							if !(e <= tol) {
								t.Fatalf("x row %d output %d: %v, want %v (|Δ| %.3g > %.3g)", y, i, v, want[k], e, tol)
							}
						}
						if string(row[4*c.rows:]) != string(make([]byte, 16)) {
							t.Fatalf("x row %d: bytes after the row were written", y)
						}
					}
				})
			}
		}
		t.Logf("%v: largest |Δ|/tolerance %.3f", typ, worst)
	}
}
