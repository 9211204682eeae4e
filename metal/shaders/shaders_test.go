//go:build linux

package shaders

import (
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"nibble/metal/device"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/emulator/emutest"
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
		emutest.Unavailable(t, err)
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

// run submits one dispatch in order o and waits for it.
func run(t *testing.T, d *emulator.Device, o emulator.Order, x device.Dispatch) {
	t.Helper()
	var l device.CommandList
	l.Add(x)
	submit(t, d, o, &l)
}

// submit runs the command list in order o and waits for it.
func submit(t *testing.T, d *emulator.Device, o emulator.Order, l *device.CommandList) {
	t.Helper()
	d.SetOrder(o)
	defer d.SetOrder(emulator.Forward)
	if err := d.Submit(l); err != nil {
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
