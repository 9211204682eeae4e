package metal

import (
	"fmt"
	"runtime"
	"strings"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/metal/device"
)

// Backend names for Choose (the CLI's --backend values).
const (
	BackendAuto  = "auto"
	BackendCPU   = "cpu"
	BackendMetal = "metal"
)

// Choice is which backend runs the model and why, for the CLI and the
// app's Diagnostics, e.g. "metal — Apple M2 Pro, residency set" or
// "cpu — no Metal on this system".
type Choice struct {
	Backend string // "cpu" or "metal"
	Reason  string
	// Device is the GPU's name when Metal runs ("" for the CPU).
	Device string
}

func (c Choice) String() string { return c.Backend + " — " + c.Reason }

// ParseBackend checks a --backend value ("" is auto).
func ParseBackend(s string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", BackendAuto:
		return BackendAuto, nil
	case BackendCPU, BackendMetal:
		return v, nil
	}
	return "", fmt.Errorf("backend %q: want cpu, metal or auto", s)
}

// owned is the Metal backend together with the device it runs on: its
// Close closes both (metal.New leaves the device to its caller).
type owned struct {
	*Backend
	dev device.Device
}

func (o *owned) Close() error {
	err := o.Backend.Close()
	if e := o.dev.Close(); err == nil {
		err = e
	}
	return err
}

// newDefault returns the Metal backend on this system's default GPU (it
// owns the device: Close closes both) and a description of the device for
// Diagnostics ("Apple M2 Pro, residency set"). It fails on a system
// without Metal: everywhere but macOS with an error wrapping
// mtl.ErrUnsupported ("the Metal backend needs macOS"), on a Mac without a usable GPU
// with one wrapping mtl.ErrNoDevice. The MSL emulator is for tests and is
// never chosen here.
func newDefault() (*owned, string, error) {
	dev, about, err := openDefault()
	if err != nil {
		return nil, "", err
	}
	b, err := New(dev)
	if err != nil {
		dev.Close()
		return nil, "", err
	}
	return &owned{Backend: b, dev: dev}, about, nil
}

// Choose makes the backend want names: "cpu" (on threads threads, 0 = all
// cores), "metal" (an error where there is none: see newDefault) or "auto"
// / "": Metal on a Mac whose GPU opens and compiles the kernels, the CPU
// otherwise. In auto mode the error is always nil and the Choice says why
// the CPU runs.
func Choose(want string, threads int) (backend.Backend, Choice, error) {
	want, err := ParseBackend(want)
	if err != nil {
		return nil, Choice{}, err
	}
	if want == BackendCPU {
		return cpu.New(threads), Choice{Backend: BackendCPU, Reason: "chosen with --backend cpu"}, nil
	}
	b, about, err := newDefault()
	if err == nil {
		reason := about
		if want == BackendMetal {
			reason += " (chosen with --backend metal)"
		}
		return b, Choice{Backend: BackendMetal, Reason: reason, Device: b.dev.Name()}, nil
	}
	if want == BackendMetal {
		return nil, Choice{}, fmt.Errorf("--backend metal: %w", err)
	}
	return cpu.New(threads), Choice{Backend: BackendCPU, Reason: cpuReason(err)}, nil
}

// cpuReason says why auto fell back to the CPU.
func cpuReason(err error) string {
	if runtime.GOOS != "darwin" {
		return "no Metal on this system"
	}
	msg, rest, _ := strings.Cut(err.Error(), "\n")
	if strings.TrimSpace(rest) != "" {
		msg += " …" // a compiler log: its first line is enough here
	}
	return "Metal is not usable: " + msg
}
