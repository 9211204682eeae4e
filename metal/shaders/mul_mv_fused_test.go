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
	"nibble/metal/internal/emulator"
)

// mvFusedCases: W rows×cols, xrows rows of x (nx = min(xrows, 4) per
// threadgroup) on 8 cores (no split) and 1000 (split where the chunks
// allow), for the norm-fused mat-vec.
var mvFusedCases = []mulMVCase{
	{256, 5, 1, 1, 8}, {768, 20, 3, 3, 8}, {2048, 37, 1, 1, 8}, {2048, 37, 1, 1, 1000}, {1024, 9, 2, 2, 1000},
}

// mvNorm runs kernel_mul_mv_norm_<typ>, buffer 4 the norm's weight. dst
// rows are 4·rows+16 bytes apart.
func mvNorm(t *testing.T, d *emulator.Device, l *emulator.Library, o emulator.Order, typ ggml.Type, c mulMVCase,
	eps float32, w, x, gw device.Buffer) []byte {
	t.Helper()
	p, err := l.Pipeline("kernel_mul_mv_norm_"+encoder.KernelSuffix(typ), device.Constant{Index: 600, Value: int16(c.nx)})
	if err != nil {
		t.Fatal(err)
	}
	g := encoder.MatVecGrid(typ, c.rows, c.cols, (c.xrows+c.nx-1)/c.nx, c.cores, encoder.MatVecSimdgroupsPerCore)
	dStride := 4*c.rows + 16
	dst := buffer(t, d, make([]byte, dStride*c.xrows))
	run(t, d, o, device.Dispatch{
		Pipeline:    p,
		Groups:      [3]int{g.Groups, (c.xrows + c.nx - 1) / c.nx, 1},
		Threads:     [3]int{g.Threads(), 1, 1},
		Threadgroup: []int{g.ThreadgroupBytes(c.nx, true)},
		Inline: []device.Inline{{Index: 0, Data: encoder.MulMVArgs{Cols: uint32(c.cols), Rows: uint32(c.rows), XRows: uint32(c.xrows),
			WStride: uint32(typ.RowBytes(c.cols)), XStride: uint32(4 * c.cols), DStride: uint32(dStride), Split: uint32(g.Split), Eps: eps}.Bytes()}},
		Buffers: []device.Binding{{Index: 1, Buffer: w}, {Index: 2, Buffer: x}, {Index: 3, Buffer: dst}, {Index: 4, Buffer: gw}},
	})
	return dst.Bytes()
}

// checkMV compares dst (rows 4·rows+16 bytes apart) with want within
// tol·scale per output and checks that nothing past a row was written.
func checkMV(t *testing.T, dst []byte, rows, xrows int, want, scale []float64, tol float64) float64 {
	t.Helper()
	worst := 0.0
	stride := 4*rows + 16
	for y := 0; y < xrows; y++ {
		row := dst[y*stride : (y+1)*stride]
		for i, v := range f32s(row[:4*rows]) {
			k := y*rows + i
			e := math.Abs(float64(v) - want[k])
			worst = math.Max(worst, e/(tol*scale[k]))
			if !(e <= tol*scale[k]) {
				t.Fatalf("x row %d output %d: %v, want %v (|Δ| %.3g > %.3g)", y, i, v, want[k], e, tol*scale[k])
			}
		}
		if string(row[4*rows:]) != string(make([]byte, 16)) {
			t.Fatalf("x row %d: bytes after the row were written", y)
		}
	}
	return worst
}

// The RMS norm fused into the mat-vec (kernel_mul_mv_norm_<type>) against its twin in
// float64, W·(x·g/sqrt(mean(x²) + eps)), for every weight type. Tolerance:
// mul_mv's 1e-6·Σ|w·x'| doubled for the scale's own rounding (a float32
// Σx² over up to 2048 elements, a division and a square root).
func TestMulMVNorm(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(61, 62))
	const eps = 1e-5
	for _, typ := range weightTypes {
		worst := 0.0
		for _, c := range mvFusedCases {
			data := randomWeights(r, typ, c.rows, c.cols, 0.5)
			wf := make([]float32, c.rows*c.cols)
			dequantize(t, typ, wf, data)
			x, gw := ewRandom(r, c.xrows*c.cols, 3), ewRandom(r, c.cols, 1)
			xn64 := make([]float64, len(x)) // the twin's input, x·g·s in float64
			for y := 0; y < c.xrows; y++ {
				var ss float64
				for _, v := range x[y*c.cols : (y+1)*c.cols] {
					ss += float64(v) * float64(v)
				}
				s := 1 / math.Sqrt(ss/float64(c.cols)+eps)
				for i := 0; i < c.cols; i++ {
					xn64[y*c.cols+i] = float64(x[y*c.cols+i]) * float64(gw[i]) * s
				}
			}
			want := make([]float64, c.rows*c.xrows)
			scale := make([]float64, c.rows*c.xrows)
			for y := 0; y < c.xrows; y++ {
				for k := 0; k < c.rows; k++ {
					var sum, a float64
					for i := 0; i < c.cols; i++ {
						p := float64(wf[k*c.cols+i]) * xn64[y*c.cols+i]
						sum += p
						a += math.Abs(p)
					}
					want[y*c.rows+k], scale[y*c.rows+k] = sum, a
				}
			}
			for _, o := range orders {
				g := encoder.MatVecGrid(typ, c.rows, c.cols, (c.xrows+c.nx-1)/c.nx, c.cores, encoder.MatVecSimdgroupsPerCore)
				t.Run(fmt.Sprintf("%s_%dx%d_x%d_split%d_%v", typ, c.rows, c.cols, c.xrows, g.Split, o), func(t *testing.T) {
					xb := buffer(t, d, f32Bytes(x))
					dst := mvNorm(t, d, l, o, typ, c, eps, buffer(t, d, data), xb, buffer(t, d, f32Bytes(gw)))
					worst = max(worst, checkMV(t, dst, c.rows, c.xrows, want, scale, 2e-6))
				})
			}
		}
		t.Logf("%v: largest |Δ|/tolerance %.3f", typ, worst)
	}
}
