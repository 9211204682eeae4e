//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/metal/internal/emulator"
)

// opsVector is a one-row F32 weight holding x, for the CPU backend and on
// the device (at byte off of its buffer).
func opsVector(t *testing.T, dev *emulator.Device, b *cpu.Backend, x []float32, off int) (backend.Weight, *Weight) {
	t.Helper()
	data := f32Bytes(x)
	m, err := b.MapWeights(data, []backend.WeightDesc{{Name: "v", Type: ggml.F32, Rows: 1, Cols: len(x)}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Weights()[0], &Weight{Region: devBytes(t, dev, data, off), Type: ggml.F32, Rows: 1, Cols: len(x)}
}

func opsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// Add, SwiGLU, AddBias, Copy and Argmax on the emulator against the CPU
// backend's ops, on the engine's widths, with aligned (float4 kernels) and
// unaligned (float kernels) offsets. Tolerance: none (the kernels compute
// the CPU's operations; see metal/shaders for what a GPU may fuse).
func TestEncoderElementwise(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(71, 72))
	for _, c := range []struct{ n, rows, off int }{{896, 3, 0}, {4864, 1, 16}, {1000, 2, 4}, {37, 5, 0}, {151936, 1, 0}} {
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("n%d_rows%d_off%d_%v", c.n, c.rows, c.off, o), func(t *testing.T) {
				m := c.n * c.rows
				a, x, u := randomFloats(r, m, 1), randomFloats(r, m, 3), randomFloats(r, m, 1)

				dst, src := devFloats(t, dev, a, c.off), devFloats(t, dev, x, c.off)
				e.Add(dst, src, m)
				want := cpuTensor(cb, a)
				cb.Add(want, cpuTensor(cb, x), m)
				runEncoded(t, dev, e, o)
				opsEqual(t, "add", readFloats(dst), want.D)

				sw := devFloats(t, dev, make([]float32, m), c.off)
				e.SwiGLU(sw, src, devFloats(t, dev, u, 0), m)
				want = cpuTensor(cb, make([]float32, m))
				cb.SwiGLU(want, cpuTensor(cb, x), cpuTensor(cb, u), m)
				runEncoded(t, dev, e, o)
				opsEqual(t, "swiglu", readFloats(sw), want.D)

				bias := randomFloats(r, c.n, 1)
				cw, gw := opsVector(t, dev, cb, bias, c.off)
				xb := devFloats(t, dev, a, 0)
				e.AddBias(xb, gw, c.rows)
				want = cpuTensor(cb, a)
				cb.AddBias(want, cw, c.rows)
				runEncoded(t, dev, e, o)
				opsEqual(t, "add_bias", readFloats(xb), want.D)

				// Copy half between float offsets of two tensors.
				cp := devFloats(t, dev, a, 0)
				cn := m / 2
				so, do := 3, m-cn
				e.Copy(cp, do, src, so, cn)
				want = cpuTensor(cb, a)
				cb.Copy(want, do, cpuTensor(cb, x), so, cn)
				runEncoded(t, dev, e, o)
				opsEqual(t, "copy", readFloats(cp), want.D)

				// Argmax: a tie of the maximum in the last row.
				x[m-1], x[m-2-c.n/3] = 50, 50
				am := devFloats(t, dev, make([]float32, c.rows), 0)
				e.Argmax(am, devFloats(t, dev, x, c.off), c.rows, c.n)
				want = cpuTensor(cb, make([]float32, c.rows))
				cb.Argmax(want, cpuTensor(cb, x), c.rows, c.n)
				runEncoded(t, dev, e, o)
				opsEqual(t, "argmax", readFloats(am), want.D)
			})
		}
	}
}

// Arguments that break the ops' contracts are encoding errors, not
// dispatches.
func TestEncoderElementwiseContract(t *testing.T) {
	dev, e := emuEncoder(t)
	x := devFloats(t, dev, make([]float32, 64), 0)
	f16 := &Weight{Region: x, Type: ggml.F16, Rows: 1, Cols: 64}
	for _, c := range []struct {
		what string
		op   func()
	}{
		{"floats", func() { e.Add(x, x, 65) }},
		{"floats", func() { e.SwiGLU(x, x, x.Sub(0, 16), 8) }},
		{"overlapping", func() { e.Copy(x, 1, x, 0, 8) }},
		{"copy: 8 floats", func() { e.Copy(x, 60, x, 0, 8) }},
		{"F32 only", func() { e.AddBias(x, f16, 1) }},
		{"argmax: 2 rows of 0", func() { e.Argmax(x, x, 2, 0) }},
		{"F32 or F16 only", func() { e.RMSNorm(x, x, &Weight{Region: x, Type: ggml.Q8_0, Rows: 1, Cols: 32}, 1e-5, 1) }},
		{"multiples of 16", func() {
			w := &Weight{Region: x.Sub(4, 32), Type: ggml.F32, Rows: 1, Cols: 8}
			e.RMSNorm(x, x, w, 1e-5, 1)
		}},
	} {
		wantRefused(t, e, c.what, c.what, c.op)
	}
	// Copying a span onto itself is nothing to do.
	e.Copy(x, 4, x, 4, 8)
	if e.Err() != nil || e.List().Len() != 0 {
		t.Errorf("copy onto itself: %v, %d dispatches", e.Err(), e.List().Len())
	}
}

// GeluGLU, Scale and Softcap (the newer families' ops) on the emulator
// against the CPU backend's, aligned and unaligned. Tolerance: none for
// GeluGLU (the CPU's formula, operation for operation) and Scale (one
// product); Softcap within 4e-7·c (its tanh goes through 2^, the CPU's
// through float64; metal/shaders has the edges).
func TestEncoderFamilyOps(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(79, 80))
	for _, c := range []struct{ n, off int }{{9216, 0}, {2304, 16}, {1001, 4}, {256000, 0}} {
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("n%d_off%d_%v", c.n, c.off, o), func(t *testing.T) {
				g, u := randomFloats(r, c.n, 3), randomFloats(r, c.n, 1)
				dst := devFloats(t, dev, make([]float32, c.n), c.off)
				e.GeluGLU(dst, devFloats(t, dev, g, c.off), devFloats(t, dev, u, 0), c.n)
				want := cpuTensor(cb, make([]float32, c.n))
				cb.GeluGLU(want, cpuTensor(cb, g), cpuTensor(cb, u), c.n)
				runEncoded(t, dev, e, o)
				opsEqual(t, "gelu_glu", readFloats(dst), want.D)

				s := float32(math.Sqrt(2304))
				x := devFloats(t, dev, u, c.off)
				e.Scale(x, s, c.n)
				want = cpuTensor(cb, u)
				cb.Scale(want, s, c.n)
				runEncoded(t, dev, e, o)
				opsEqual(t, "scale", readFloats(x), want.D)

				const cap = 30
				logits := randomFloats(r, c.n, 40)
				x = devFloats(t, dev, logits, c.off)
				e.Softcap(x, cap, c.n)
				want = cpuTensor(cb, logits)
				cb.Softcap(want, cap, c.n)
				runEncoded(t, dev, e, o)
				for i, v := range readFloats(x) {
					if d := math.Abs(float64(v - want.D[i])); !(d <= 4e-7*cap) {
						t.Fatalf("softcap element %d: %v, want %v", i, v, want.D[i])
					}
				}
			})
		}
	}
	// A cap that is not positive and finite is refused at encode time.
	for _, c := range []float32{0, -1, float32(math.Inf(1)), float32(math.NaN())} {
		e.Softcap(devFloats(t, dev, make([]float32, 4), 0), c, 4)
		if e.Err() == nil {
			t.Errorf("softcap with c = %v encoded", c)
		}
		e.Reset()
	}
}
