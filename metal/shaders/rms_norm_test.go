//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// rmsNormTwin is the CPU backend's rms_norm (engine/cpu Backend.RMSNorm):
// the sum of squares in float64, the scale and products in float32.
func rmsNormTwin(x, w []float32, n int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		var sum float64
		for _, v := range row {
			sum += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(sum/float64(n)+float64(eps)))
		for i, v := range row {
			out[r*n+i] = v * scale * w[i]
		}
	}
	return out
}

// kernel_rms_norm_{f32,f16} against its twin, the weight f32 or f16.
// Tolerance: 2e-6 relative to the row's largest output (the kernel sums
// squares in float32, in simd order).
func TestRMSNorm(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(11, 12))
	for i, c := range []struct{ n, rows, threads int }{
		{64, 1, 32}, {128, 3, 64}, {256, 2, 256}, {100, 5, 32}, {2052, 3, 1024}, {4096, 4, 256}, {8192, 1, 1024}, {5120, 2, 96}, {896, 2, 224},
	} {
		f16 := i%2 == 1
		p := pipeline(t, l, "kernel_rms_norm_f32")
		if f16 {
			p = pipeline(t, l, "kernel_rms_norm_f16")
		}
		x := make([]float32, c.n*c.rows)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp(3*r.NormFloat64())) // rows of very different scale
		}
		w := make([]float32, c.n)
		for i := range w {
			w[i] = float32(1 + 0.3*r.NormFloat64())
		}
		wb := f32Bytes(w)
		if f16 {
			wb = make([]byte, 2*c.n)
			for i := range w {
				h := half.FromFloat32(w[i])
				w[i] = half.ToFloat32(h)
				binary.LittleEndian.PutUint16(wb[2*i:], h)
			}
		}
		const eps = 1e-5
		want := rmsNormTwin(x, w, c.n, eps)
		for _, o := range orders {
			t.Run(fmt.Sprintf("n%d_rows%d_threads%d_f16%v_%v", c.n, c.rows, c.threads, f16, o), func(t *testing.T) {
				// Rows of the output a little apart from each other, to
				// check the strides.
				dstStride := 4*c.n + 16
				dst := buffer(t, d, make([]byte, dstStride*c.rows))
				run(t, d, o, device.Dispatch{
					Pipeline: p, Groups: [3]int{c.rows, 1, 1}, Threads: [3]int{c.threads, 1, 1},
					Inline:      []device.Inline{{Index: 0, Data: encoder.RMSNormArgs{N: uint32(c.n), SrcStride: uint32(4 * c.n), DstStride: uint32(dstStride), Eps: float32(eps)}.Bytes()}},
					Buffers:     []device.Binding{{Index: 1, Buffer: buffer(t, d, f32Bytes(x))}, {Index: 2, Buffer: buffer(t, d, wb)}, {Index: 3, Buffer: dst}},
					Threadgroup: []int{32 * 4},
				})
				for row := 0; row < c.rows; row++ {
					got := f32s(dst.Bytes()[row*dstStride : row*dstStride+4*c.n])
					exp := want[row*c.n : (row+1)*c.n]
					var scale float64
					for _, v := range exp {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i := range got {
						if e := math.Abs(float64(got[i] - exp[i])); !(e <= 2e-6*scale) {
							t.Fatalf("row %d element %d: %v, want %v (error %.3g of %.3g)", row, i, got[i], exp[i], e, scale)
						}
					}
				}
			})
		}
	}
}

// kernel_rms_norm_plain_f32 (through encoder.RMSNormPlain) against the
// twin with a weight of ones (the CPU backend's RMSNormPlain: the same sums
// and scale, no product), in place too. Tolerance: 2e-6 of the row's
// largest output, as TestRMSNorm.
func TestRMSNormPlain(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct{ n, rows int }{{8, 1}, {64, 7}, {256, 33}, {512, 3}, {100, 2}, {4100, 2}} {
		x := make([]float32, c.n*c.rows)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp(3*r.NormFloat64()))
		}
		ones := make([]float32, c.n)
		for i := range ones {
			ones[i] = 1
		}
		const eps = 1e-6
		want := rmsNormTwin(x, ones, c.n, eps)
		for _, inPlace := range []bool{false, true} {
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_rows%d_inplace%v_%v", c.n, c.rows, inPlace, o), func(t *testing.T) {
					enc := encoder.New(d, l)
					defer enc.Close()
					src := encoder.Region{Buf: buffer(t, d, f32Bytes(x)), Len: 4 * len(x)}
					dst := src
					if !inPlace {
						dst = encoder.Region{Buf: buffer(t, d, make([]byte, 4*len(x))), Len: 4 * len(x)}
					}
					enc.RMSNormPlain(dst, src, eps, c.rows, c.n)
					runEncoded(t, d, o, enc)
					got := f32s(dst.Buf.Bytes())
					for row := 0; row < c.rows; row++ {
						exp := want[row*c.n : (row+1)*c.n]
						var scale float64
						for _, v := range exp {
							scale = math.Max(scale, math.Abs(float64(v)))
						}
						for i, v := range got[row*c.n : (row+1)*c.n] {
							if e := math.Abs(float64(v - exp[i])); !(e <= 2e-6*scale) {
								t.Fatalf("row %d element %d: %v, want %v (error %.3g of %.3g)", row, i, v, exp[i], e, scale)
							}
						}
					}
				})
			}
		}
	}
	enc := encoder.New(d, l)
	defer enc.Close()
	buf := encoder.Region{Buf: buffer(t, d, make([]byte, 4096)), Len: 4096}
	for _, bad := range []struct{ rows, n int }{{2, 6}, {1, 0}, {5, 256}} {
		enc.RMSNormPlain(buf, buf, 1e-6, bad.rows, bad.n)
		if enc.Err() == nil {
			t.Errorf("%d rows of %d: no error", bad.rows, bad.n)
		}
		enc.Reset()
	}
}
