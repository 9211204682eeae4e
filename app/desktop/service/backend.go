package service

import (
	"sync"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/metal"
)

// engineBackend is the schedulers' NewBackend: metal.Choose("auto"), the
// CLI's default too (Metal on a Mac whose GPU opens, the CPU on threads
// otherwise). The choice and its reason are kept for Diagnostics.
func engineBackend(threads int) func() backend.Backend {
	return func() backend.Backend {
		b, c, err := metal.Choose(metal.BackendAuto, threads)
		if err != nil { // auto falls back to the CPU itself; this is a guard
			b, c = cpu.New(threads), metal.Choice{Backend: metal.BackendCPU, Reason: err.Error()}
		}
		chosen.Lock()
		chosen.c, chosen.ok = c, true
		chosen.Unlock()
		return b
	}
}

// chosen is the latest backend choice (one engine runs at a time).
var chosen struct {
	sync.Mutex
	c  metal.Choice
	ok bool
}

// backendChoice is the backend the engine runs on and why, once a
// scheduler has made one.
func backendChoice() (metal.Choice, bool) {
	chosen.Lock()
	defer chosen.Unlock()
	return chosen.c, chosen.ok
}

// estimateBackend is the backend whose footprint the estimates assume: the
// one the engine chose, else the CPU.
func estimateBackend() string {
	if c, ok := backendChoice(); ok {
		return c.Backend
	}
	return metal.BackendCPU
}
