// Package backends chooses the backend a model runs on: the CPU backend
// (engine/cpu) or the Metal backend (metal). It sits above both, so that
// neither imports the other.
package backends

import (
	"fmt"
	"runtime"
	"strings"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/metal"
)

// Backend names for Choose (the CLI's --backend values).
const (
	Auto  = "auto"
	CPU   = "cpu"
	Metal = "metal"
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

// Parse checks a --backend value ("" is auto).
func Parse(s string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", Auto:
		return Auto, nil
	case CPU, Metal:
		return v, nil
	}
	return "", fmt.Errorf("backend %q: want cpu, metal or auto", s)
}

// Choose makes the backend want names: "cpu" (on threads threads, 0 = all
// cores), "metal" (an error where there is none: see metal.NewDefault) or
// "auto" / "": Metal on a Mac whose GPU opens and compiles the kernels, the
// CPU otherwise. In auto mode the error is always nil and the Choice says
// why the CPU runs.
func Choose(want string, threads int) (backend.Backend, Choice, error) {
	want, err := Parse(want)
	if err != nil {
		return nil, Choice{}, err
	}
	if want == CPU {
		return cpu.New(threads), Choice{Backend: CPU, Reason: "chosen with --backend cpu"}, nil
	}
	b, about, err := metal.NewDefault()
	if err == nil {
		reason := about
		if want == Metal {
			reason += " (chosen with --backend metal)"
		}
		return b, Choice{Backend: Metal, Reason: reason, Device: b.Device().Name()}, nil
	}
	if want == Metal {
		return nil, Choice{}, fmt.Errorf("--backend metal: %w", err)
	}
	return cpu.New(threads), Choice{Backend: CPU, Reason: cpuReason(err)}, nil
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
