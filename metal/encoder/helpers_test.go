//go:build linux

package encoder

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/emulator/emutest"
	"nibble/metal/shaders"
)

// emuEncoder is the emulator with every kernel and an encoder on it; the
// test is skipped where the emulator is not available.
func emuEncoder(t *testing.T) (*emulator.Device, *Encoder) {
	t.Helper()
	if err := emulator.Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	srcs, err := shaders.Sources()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := emulator.New(emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	lib, err := dev.Build(srcs)
	if err != nil {
		t.Fatal(err)
	}
	e := New(dev, lib)
	t.Cleanup(e.Close)
	return dev, e
}

// wantRefused runs op, which must record an error that says want and
// encode nothing (name labels the case), then resets e.
func wantRefused(t *testing.T, e *Encoder, name, want string, op func()) {
	t.Helper()
	op()
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one that says %q", name, err, want)
	}
	if n := e.List().Len(); n != 0 {
		t.Errorf("%s: %d dispatches encoded", name, n)
	}
	e.Reset()
}

// runEncoded runs what e encoded, in order o, waits for it and resets e.
func runEncoded(t *testing.T, dev *emulator.Device, e *Encoder, o emulator.Order) {
	t.Helper()
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	dev.SetOrder(o)
	defer dev.SetOrder(emulator.Forward)
	if err := dev.Submit(e.List()); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	e.Reset()
}

// devBytes is a device region holding b, from byte off of its buffer.
func devBytes(t *testing.T, dev *emulator.Device, b []byte, off int) Region {
	t.Helper()
	buf, err := dev.NewBuffer(off + len(b) + 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Release)
	copy(buf.Bytes()[off:], b)
	return Region{Buf: buf, Off: off, Len: len(b)}
}

// devFloats is a device region holding x, from byte off of its buffer.
func devFloats(t *testing.T, dev *emulator.Device, x []float32, off int) Region {
	return devBytes(t, dev, f32Bytes(x), off)
}

// readFloats is the region's floats (after Sync).
func readFloats(r Region) []float32 {
	b := r.Buf.Bytes()[r.Off : r.Off+r.Len]
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// f32Bytes is v little-endian.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// randomFloats is n normal values of standard deviation scale.
func randomFloats(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// cpuTensor is a CPU backend tensor holding x.
func cpuTensor(b *cpu.Backend, x []float32) *cpu.Tensor {
	t := b.Alloc(len(x)).(*cpu.Tensor)
	copy(t.D, x)
	return t
}
