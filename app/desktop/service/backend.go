package service

import (
	"nibble/engine/backend"
	"nibble/metal"
)

// engineBackend is the schedulers' NewBackend: metal.Choose("auto"), the
// CLI's default too (Metal on a Mac whose GPU opens, the CPU on threads
// otherwise). A scheduler makes its backend when it is made, so the choice
// and its reason are recorded, for Diagnostics and the estimates, before
// anything asks for them.
func (s *Service) engineBackend(threads int) func() backend.Backend {
	return func() backend.Backend {
		// auto never fails: without a usable GPU it is the CPU, and the
		// Choice says why.
		b, c, _ := metal.Choose(metal.BackendAuto, threads)
		s.choiceMu.Lock()
		s.choice = c
		s.choiceMu.Unlock()
		return b
	}
}

// backendChoice is the backend the engine runs on and why.
func (s *Service) backendChoice() metal.Choice {
	s.choiceMu.Lock()
	defer s.choiceMu.Unlock()
	return s.choice
}
