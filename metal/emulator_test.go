//go:build linux

package metal_test

import (
	"sync"
	"testing"

	"nibble/metal"
	"nibble/metal/internal/emulator"
	"nibble/metal/internal/emulator/emutest"
)

var (
	emuOnce sync.Once
	emuDev  *emulator.Device
	emuErr  error
)

// emulatorDevice is the MSL emulator, one per test binary (the backends of
// the tests share it; each builds its library, from the build cache after
// the first). The tests are skipped, saying why, where clang is missing.
func emulatorDevice(t *testing.T) *emulator.Device {
	t.Helper()
	if err := emulator.Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	emuOnce.Do(func() { emuDev, emuErr = emulator.New(emulator.Options{}) })
	if emuErr != nil {
		t.Fatal(emuErr)
	}
	return emuDev
}

// newBackend is a Metal backend on the emulator, closed when t ends.
func newBackend(t *testing.T) *metal.Backend {
	t.Helper()
	b, err := metal.New(emulatorDevice(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
