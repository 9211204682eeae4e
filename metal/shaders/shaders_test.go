//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"nibble/metal/device"
	"nibble/metal/emulator"
)

var orders = []emulator.Order{emulator.Forward, emulator.Reverse}

var (
	once   sync.Once
	dev    *emulator.Device
	lib    *emulator.Library
	devErr error
)

// emu is the emulator with every kernel of this package, built once per
// test binary (and from the build cache after the first run).
func emu(t *testing.T) (*emulator.Device, *emulator.Library) {
	t.Helper()
	if err := emulator.Available(); err != nil {
		t.Skipf("Metal kernel tests skipped: %v", err)
	}
	once.Do(func() {
		srcs, err := Sources()
		if err != nil {
			devErr = err
			return
		}
		if dev, devErr = emulator.New(emulator.Options{}); devErr != nil {
			return
		}
		lib, devErr = dev.Build(srcs)
	})
	if devErr != nil {
		t.Fatal(devErr)
	}
	return dev, lib
}

func buffer(t *testing.T, d *emulator.Device, b []byte) device.Buffer {
	t.Helper()
	buf, err := d.NewBuffer(len(b))
	if err != nil {
		t.Fatal(err)
	}
	copy(buf.Bytes(), b)
	t.Cleanup(buf.Release)
	return buf
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// args packs 32-bit fields, the layout of the kernels' argument structs.
func args(fields ...any) []byte {
	var b []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		default:
			panic(fmt.Sprintf("args: %T", f))
		}
	}
	return b
}

// run submits one dispatch in order o and waits for it.
func run(t *testing.T, d *emulator.Device, o emulator.Order, x device.Dispatch) {
	t.Helper()
	d.SetOrder(o)
	defer d.SetOrder(emulator.Forward)
	var l device.CommandList
	l.Add(x)
	if err := d.Submit(&l); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func pipeline(t *testing.T, l *emulator.Library, name string) device.Pipeline {
	t.Helper()
	p, err := l.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

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

// kernel_rms_norm_f32 against its twin. Tolerance: 2e-6 relative to the
// row's largest output (the kernel sums squares in float32, in simd order).
func TestRMSNorm(t *testing.T) {
	d, l := emu(t)
	p := pipeline(t, l, "kernel_rms_norm_f32")
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ n, rows, threads int }{
		{64, 1, 32}, {128, 3, 64}, {256, 2, 256}, {100, 5, 32}, {2052, 3, 1024}, {4096, 4, 256}, {8192, 1, 1024}, {5120, 2, 96},
	} {
		x := make([]float32, c.n*c.rows)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp(3*r.NormFloat64())) // rows of very different scale
		}
		w := make([]float32, c.n)
		for i := range w {
			w[i] = float32(1 + 0.3*r.NormFloat64())
		}
		const eps = 1e-5
		want := rmsNormTwin(x, w, c.n, eps)
		for _, o := range orders {
			t.Run(fmt.Sprintf("n%d_rows%d_threads%d_%v", c.n, c.rows, c.threads, o), func(t *testing.T) {
				// Rows of the output a little apart from each other, to
				// check the strides.
				dstStride := 4*c.n + 16
				dst := buffer(t, d, make([]byte, dstStride*c.rows))
				run(t, d, o, device.Dispatch{
					Pipeline: p, Groups: [3]int{c.rows, 1, 1}, Threads: [3]int{c.threads, 1, 1},
					Inline:      []device.Inline{{Index: 0, Data: args(c.n, 4*c.n, dstStride, float32(eps))}},
					Buffers:     []device.Binding{{Index: 1, Buffer: buffer(t, d, f32Bytes(x))}, {Index: 2, Buffer: buffer(t, d, f32Bytes(w))}, {Index: 3, Buffer: dst}},
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
