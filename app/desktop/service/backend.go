package service

import (
	"nibble/app/backends"
	"nibble/engine/backend"
)

// engineBackend is the schedulers' NewBackend: backends.Choose("auto"), the
// CLI's default too (Metal on a Mac whose GPU opens, the CPU on threads
// otherwise). A scheduler makes its backend when it is made, so the choice
// and its reason are recorded, for Diagnostics and the estimates, before
// anything asks for them.
func (s *Service) engineBackend(threads int) func() backend.Backend {
	return func() backend.Backend {
		// auto never fails: without a usable GPU it is the CPU, and the
		// Choice says why.
		b, c, _ := backends.Choose(backends.Auto, threads)
		s.choiceMu.Lock()
		s.choice = c
		s.choiceMu.Unlock()
		return b
	}
}

// backendChoice is the backend the engine runs on and why.
func (s *Service) backendChoice() backends.Choice {
	s.choiceMu.Lock()
	defer s.choiceMu.Unlock()
	return s.choice
}
