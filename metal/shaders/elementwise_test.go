//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/fastmath"
	"nibble/engine/ggml"
	"nibble/metal/device"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
)

// ewRun runs one elementwise kernel, scalar (_f32) or float4 (_f32_4), over
// n floats in one dispatch of 256-thread groups, rows rows along grid y.
func ewRun(t *testing.T, d *emulator.Device, o emulator.Order, name string, vec bool, n, rows int, bufs ...device.Buffer) {
	t.Helper()
	_, l := emu(t)
	count := n
	if vec {
		name += "_4"
		count = n / 4
	}
	var b []device.Binding
	for i, buf := range bufs {
		b = append(b, device.Binding{Index: i + 1, Buffer: buf})
	}
	run(t, d, o, device.Dispatch{
		Pipeline: pipeline(t, l, name), Groups: [3]int{(count + 255) / 256, rows, 1}, Threads: [3]int{256, 1, 1},
		Inline:  []device.Inline{{Index: 0, Data: encoder.EWArgs{N: uint32(count)}.Bytes()}},
		Buffers: b,
	})
}

func ewRandom(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// kernel_add, kernel_add_bias and kernel_copy against the CPU backend's
// loops. Tolerance: none (one f32 add, or a copy).
func TestAddCopyBias(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, n := range []int{1, 3, 4, 64, 100, 4096, 5000, 14336 * 3} {
		for _, vec := range []bool{false, true} {
			if vec && n%4 != 0 {
				continue
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_vec%v_%v", n, vec, o), func(t *testing.T) {
					a, x := ewRandom(r, n, 1), ewRandom(r, n, 3)
					dst := buffer(t, d, f32Bytes(a))
					ewRun(t, d, o, "kernel_add_f32", vec, n, 1, dst, buffer(t, d, f32Bytes(x)))
					for i, v := range f32s(dst.Bytes()) {
						if want := a[i] + x[i]; v != want {
							t.Fatalf("add element %d: %v, want %v", i, v, want)
						}
					}

					cp := buffer(t, d, make([]byte, 4*n))
					ewRun(t, d, o, "kernel_copy_f32", vec, n, 1, cp, buffer(t, d, f32Bytes(x)))
					for i, v := range f32s(cp.Bytes()) {
						if v != x[i] {
							t.Fatalf("copy element %d: %v, want %v", i, v, x[i])
						}
					}

					// A bias of n over 3 rows.
					const rows = 3
					xs, b := ewRandom(r, rows*n, 1), ewRandom(r, n, 1)
					xb := buffer(t, d, f32Bytes(xs))
					ewRun(t, d, o, "kernel_add_bias_f32", vec, n, rows, xb, buffer(t, d, f32Bytes(b)))
					for i, v := range f32s(xb.Bytes()) {
						if want := xs[i] + b[i%n]; v != want {
							t.Fatalf("add_bias row %d element %d: %v, want %v", i/n, i%n, v, want)
						}
					}
				})
			}
		}
	}
}

// kernel_swiglu against the CPU backend's fastmath.SiLU(g)·u. Tolerance: 2
// ulp of the result, which lets a device fuse the polynomial's
// multiply-adds; the kernel computes the CPU's own formula, so the emulator
// (no fused multiply-add on x86-64) gives it exactly.
func TestSwiGLU(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(33, 34))
	for _, n := range []int{1, 7, 64, 4096, 14336, 18944 + 3} {
		g, u := ewRandom(r, n, 4), ewRandom(r, n, 1)
		// The polynomial's edges: underflow, clamping, NaN, infinities.
		for i, v := range []float32{0, float32(math.Copysign(0, -1)), 1e-30, 86, 87.5, 88.5, 90, -90, 200, -200, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
			if i < n {
				g[i] = v
			}
		}
		for _, vec := range []bool{false, true} {
			if vec && n%4 != 0 {
				continue
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_vec%v_%v", n, vec, o), func(t *testing.T) {
					dst := buffer(t, d, make([]byte, 4*n))
					ewRun(t, d, o, "kernel_swiglu_f32", vec, n, 1, dst, buffer(t, d, f32Bytes(g)), buffer(t, d, f32Bytes(u)))
					worst := 0.0
					for i, v := range f32s(dst.Bytes()) {
						want := fastmath.SiLU(g[i]) * u[i]
						if math.IsNaN(float64(want)) && math.IsNaN(float64(v)) || v == want {
							continue
						}
						ulp := math.Abs(float64(v-want)) / float64(math.Nextafter32(float32(math.Abs(float64(want))), float32(math.Inf(1)))-float32(math.Abs(float64(want))))
						worst = max(worst, ulp)
						if !(ulp <= 2) {
							t.Fatalf("element %d: silu(%v)·%v = %v, want %v", i, g[i], u[i], v, want)
						}
					}
					if worst > 0 {
						t.Logf("largest error %.1f ulp", worst)
					}
				})
			}
		}
	}
}

// argmaxTwin is the CPU backend's Argmax of one row.
func argmaxTwin(x []float32) float32 {
	best, bestV := 0, float32(math.Inf(-1))
	for i, v := range x {
		if v > bestV {
			best, bestV = i, v
		}
	}
	return float32(best)
}

// kernel_argmax_f32[_4] against the CPU backend's Argmax. Tolerance: none.
func TestArgmax(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(35, 36))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct{ n, threads int }{{1, 32}, {4, 32}, {100, 64}, {4096, 1024}, {32000, 1024}, {152064, 1024}, {151935, 1024}, {152064, 256}, {50001, 96}, {17, 32}} {
		// Rows: random; ties of the maximum far apart and near; NaN
		// everywhere but one element; all -Inf; NaN and -Inf only; +Inf
		// ties; the maximum in the last element.
		var rows [][]float32
		rows = append(rows, ewRandom(r, c.n, 1))
		tie := ewRandom(r, c.n, 1)
		for _, i := range []int{c.n - 1, c.n / 2, c.n/2 + 1, 3*c.n/4 + 7} {
			if i < c.n {
				tie[i] = 9
			}
		}
		rows = append(rows, tie)
		nans := make([]float32, c.n)
		for i := range nans {
			nans[i] = nan
		}
		nans[c.n*2/3] = -5
		rows = append(rows, nans)
		ninf := make([]float32, c.n)
		for i := range ninf {
			ninf[i] = -inf
			if i%3 == 1 {
				ninf[i] = nan
			}
		}
		rows = append(rows, ninf)
		pinf := ewRandom(r, c.n, 1)
		pinf[c.n-1] = inf
		pinf[c.n*3/5] = inf
		rows = append(rows, pinf)
		last := ewRandom(r, c.n, 1)
		last[c.n-1] = 100
		rows = append(rows, last)

		var x []float32
		for _, row := range rows {
			x = append(x, row...)
		}
		name := "kernel_argmax_f32"
		if c.n%4 == 0 {
			name += "_4"
		}
		p := pipeline(t, l, name)
		for _, o := range orders {
			t.Run(fmt.Sprintf("%s_n%d_threads%d_%v", name, c.n, c.threads, o), func(t *testing.T) {
				dst := buffer(t, d, make([]byte, 4*len(rows)))
				run(t, d, o, device.Dispatch{
					Pipeline: p, Groups: [3]int{len(rows), 1, 1}, Threads: [3]int{c.threads, 1, 1},
					Inline:      []device.Inline{{Index: 0, Data: encoder.EWArgs{N: uint32(c.n)}.Bytes()}},
					Buffers:     []device.Binding{{Index: 1, Buffer: buffer(t, d, f32Bytes(x))}, {Index: 2, Buffer: dst}},
					Threadgroup: []int{64 * 4},
				})
				for i, v := range f32s(dst.Bytes()) {
					if want := argmaxTwin(rows[i]); v != want {
						t.Fatalf("row %d: %v, want %v", i, v, want)
					}
				}
			})
		}
	}
}

// ewRunScalar runs an elementwise kernel whose arguments are ew_scalar_args
// (the count, then s) over n floats of x in place.
func ewRunScalar(t *testing.T, d *emulator.Device, o emulator.Order, name string, vec bool, n int, s float32, x device.Buffer) {
	t.Helper()
	_, l := emu(t)
	count := n
	if vec {
		name += "_4"
		count = n / 4
	}
	run(t, d, o, device.Dispatch{
		Pipeline: pipeline(t, l, name), Groups: [3]int{(count + 255) / 256, 1, 1}, Threads: [3]int{256, 1, 1},
		Inline:  []device.Inline{{Index: 0, Data: encoder.EWScalarArgs{N: uint32(count), S: s}.Bytes()}},
		Buffers: []device.Binding{{Index: 1, Buffer: x}},
	})
}

// ulpsOff is |got - want| in ulps of want (0 when both are NaN or equal).
func ulpsOff(got, want float32) float64 {
	if math.IsNaN(float64(want)) && math.IsNaN(float64(got)) || got == want {
		return 0
	}
	a := float32(math.Abs(float64(want)))
	return math.Abs(float64(got-want)) / float64(math.Nextafter32(a, float32(math.Inf(1)))-a)
}

// kernel_gelu_glu against the CPU backend's fastmath.GeluTanh(g)·u.
// Tolerance: 2 ulp of the result, as for swiglu (the same polynomial; the
// emulator gives the CPU's bits).
func TestGeluGLU(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(37, 38))
	for _, n := range []int{1, 7, 64, 9216 + 3, 16384} {
		g, u := ewRandom(r, n, 3), ewRandom(r, n, 1)
		// The cube's and the polynomial's edges: tiny, large of both signs
		// (2^ clamped above, 0 below), infinities, NaN.
		for i, v := range []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 5, -5, 12, -12, 40, -40, 1e4, -1e4, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
			if i < n {
				g[i] = v
			}
		}
		for _, vec := range []bool{false, true} {
			if vec && n%4 != 0 {
				continue
			}
			for _, o := range orders {
				t.Run(fmt.Sprintf("n%d_vec%v_%v", n, vec, o), func(t *testing.T) {
					dst := buffer(t, d, make([]byte, 4*n))
					ewRun(t, d, o, "kernel_gelu_glu_f32", vec, n, 1, dst, buffer(t, d, f32Bytes(g)), buffer(t, d, f32Bytes(u)))
					worst := 0.0
					for i, v := range f32s(dst.Bytes()) {
						want := fastmath.GeluTanh(g[i]) * u[i]
						e := ulpsOff(v, want)
						worst = max(worst, e)
						if !(e <= 2) {
							t.Fatalf("element %d: gelu(%v)·%v = %v, want %v", i, g[i], u[i], v, want)
						}
					}
					t.Logf("largest error %.1f ulp", worst)
				})
			}
		}
	}
}

// kernel_scale against x·s. Tolerance: none (one product).
func TestScale(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(39, 40))
	for _, n := range []int{1, 5, 2304, 3840 + 2} {
		for _, s := range []float32{float32(math.Sqrt(2304)), 0.5, -3} {
			x := ewRandom(r, n, 0.05)
			for _, vec := range []bool{false, true} {
				if vec && n%4 != 0 {
					continue
				}
				for _, o := range orders {
					t.Run(fmt.Sprintf("n%d_s%g_vec%v_%v", n, s, vec, o), func(t *testing.T) {
						xb := buffer(t, d, f32Bytes(x))
						ewRunScalar(t, d, o, "kernel_scale_f32", vec, n, s, xb)
						for i, v := range f32s(xb.Bytes()) {
							if want := x[i] * s; v != want {
								t.Fatalf("element %d: %v·%v = %v, want %v", i, x[i], s, v, want)
							}
						}
					})
				}
			}
		}
	}
}

// kernel_softcap against the CPU backend's cpu.Softcap (float64 tanh).
// Tolerance: |Δ| ≤ 4e-7·c + 2 ulp of the result: the kernel's tanh is
// (1 - e)/(1 + e) with e = 2^(-2|x|/c·log2(e)) from the CPU's float
// polynomial, whose rounding near 1 costs about 1e-7 absolute in tanh.
func TestSoftcap(t *testing.T) {
	d, _ := emu(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []float32{30, 50, 0.75} {
		for _, n := range []int{1, 6, 4096, 32000 + 3} {
			// Logits of all sizes: below, near and far above the cap.
			x := ewRandom(r, n, float64(c))
			for i, v := range []float32{0, float32(math.Copysign(0, -1)), 1e-6, -1e-6, c, -c, 5 * c, -5 * c, 1e30, -1e30, float32(math.Inf(1)), float32(math.Inf(-1))} {
				if i < n {
					x[i] = v
				}
			}
			for _, vec := range []bool{false, true} {
				if vec && n%4 != 0 {
					continue
				}
				for _, o := range orders {
					t.Run(fmt.Sprintf("c%g_n%d_vec%v_%v", c, n, vec, o), func(t *testing.T) {
						xb := buffer(t, d, f32Bytes(x))
						ewRunScalar(t, d, o, "kernel_softcap_f32", vec, n, c, xb)
						worst := 0.0
						for i, v := range f32s(xb.Bytes()) {
							want := cpu.Softcap(x[i], c)
							a := math.Abs(float64(v - want))
							worst = max(worst, a/float64(c))
							if !(a <= 4e-7*float64(c)) && !(ulpsOff(v, want) <= 2) {
								t.Fatalf("element %d: softcap(%v, %v) = %v, want %v", i, x[i], c, v, want)
							}
						}
						t.Logf("largest |Δ|/c %.2g", worst)
					})
				}
			}
		}
	}
}

// copyRowsTwin is the CPU backend's CopyRows: block r of n floats from
// src[srcOff + r·srcStride] to dst[dstOff + r·dstStride].
func copyRowsTwin(dst []float32, dstOff, dstStride int, src []float32, srcOff, srcStride, rows, n int) {
	for r := range rows {
		copy(dst[dstOff+r*dstStride:dstOff+r*dstStride+n], src[srcOff+r*srcStride:srcOff+r*srcStride+n])
	}
}

// kernel_copy_rows_f32 (through encoder.CopyRows) against its twin: exact,
// and nothing outside the blocks written. Shapes: Gemma 4's per-layer
// inputs (a layer's 256 of 35·256 floats per token), blocks wider than a
// threadgroup, strides equal to the block.
func TestCopyRows(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(33, 34))
	for _, c := range []struct{ rows, n, dstOff, dstStride, srcOff, srcStride int }{
		{9, 24, 5, 30, 40, 100},
		{17, 256, 0, 256, 3 * 256, 35 * 256},
		{1, 1000, 7, 0, 1, 0},
		{4, 600, 0, 600, 0, 600},
		{3, 33, 2, 40, 0, 33},
	} {
		src := ewRandom(r, c.srcOff+(c.rows-1)*c.srcStride+c.n+3, 1)
		dst0 := ewRandom(r, c.dstOff+(c.rows-1)*c.dstStride+c.n+5, 1)
		want := append([]float32(nil), dst0...)
		copyRowsTwin(want, c.dstOff, c.dstStride, src, c.srcOff, c.srcStride, c.rows, c.n)
		for _, o := range orders {
			t.Run(fmt.Sprintf("rows%d_n%d_dst%d+%d_src%d+%d_%v", c.rows, c.n, c.dstOff, c.dstStride, c.srcOff, c.srcStride, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				s := encoder.Region{Buf: buffer(t, d, f32Bytes(src)), Len: 4 * len(src)}
				dst := encoder.Region{Buf: buffer(t, d, f32Bytes(dst0)), Len: 4 * len(dst0)}
				enc.CopyRows(dst, c.dstOff, c.dstStride, s, c.srcOff, c.srcStride, c.rows, c.n)
				runEncoded(t, d, o, enc)
				for i, v := range f32s(dst.Buf.Bytes()) {
					if v != want[i] {
						t.Fatalf("dst[%d] = %v, want %v", i, v, want[i])
					}
				}
			})
		}
	}
	enc := encoder.New(d, l)
	defer enc.Close()
	buf := encoder.Region{Buf: buffer(t, d, make([]byte, 400)), Len: 400}
	other := encoder.Region{Buf: buffer(t, d, make([]byte, 400)), Len: 400}
	for _, bad := range []func(){
		func() { enc.CopyRows(other, 0, 10, buf, 0, 10, 11, 10) }, // past src
		func() { enc.CopyRows(other, 95, 10, buf, 0, 10, 1, 10) }, // past dst
		func() { enc.CopyRows(other, -1, 10, buf, 0, 10, 1, 10) }, // negative offset
		func() { enc.CopyRows(buf, 0, 20, buf, 10, 20, 3, 10) },   // overlapping spans
	} {
		bad()
		if enc.Err() == nil {
			t.Error("no error")
		}
		enc.Reset()
	}
}

// scaleByExpertTwin is the CPU backend's ScaleByExpert: x[s] *= w[ids[s]].
func scaleByExpertTwin(x, w, ids []float32) {
	for s, e := range ids {
		x[s] *= w[int(e)]
	}
}

// kernel_scale_id_f32 (through encoder.ScaleByExpert) against its twin:
// exact (one product). Slots from one decode token's k to a prefill batch's,
// 128 experts (Gemma 4's 26B-A4B); factors and ids that break the contract
// are encoding errors.
func TestScaleByExpert(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(35, 36))
	for _, c := range []struct{ experts, slots int }{{128, 8}, {7, 40}, {128, 512 * 8}, {1, 3}} {
		w := ewRandom(r, c.experts, 1)
		x := ewRandom(r, c.slots, 1)
		ids := make([]float32, c.slots)
		for i := range ids {
			ids[i] = float32(r.IntN(c.experts))
		}
		want := append([]float32(nil), x...)
		scaleByExpertTwin(want, w, ids)
		for _, o := range orders {
			t.Run(fmt.Sprintf("experts%d_slots%d_%v", c.experts, c.slots, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				xr := encoder.Region{Buf: buffer(t, d, f32Bytes(x)), Len: 4 * len(x)}
				wr := &encoder.Weight{Region: encoder.Region{Buf: buffer(t, d, f32Bytes(w)), Len: 4 * len(w)}, Type: ggml.F32, Rows: 1, Cols: c.experts}
				enc.ScaleByExpert(xr, wr, c.experts, encoder.Region{Buf: buffer(t, d, f32Bytes(ids)), Len: 4 * len(ids)}, c.slots)
				runEncoded(t, d, o, enc)
				for i, v := range f32s(xr.Buf.Bytes()) {
					if v != want[i] {
						t.Fatalf("x[%d] = %v, want %v (expert %v)", i, v, want[i], ids[i])
					}
				}
			})
		}
	}
	enc := encoder.New(d, l)
	defer enc.Close()
	buf := encoder.Region{Buf: buffer(t, d, make([]byte, 64)), Len: 64}
	for _, w := range []*encoder.Weight{
		{Region: buf, Type: ggml.F16, Rows: 1, Cols: 4},
		{Region: buf, Type: ggml.F32, Rows: 1, Cols: 5},
	} {
		enc.ScaleByExpert(buf, w, 4, buf, 4)
		if enc.Err() == nil {
			t.Errorf("factors %d×%d %s for 4 experts: no error", w.Rows, w.Cols, w.Type)
		}
		enc.Reset()
	}
}
