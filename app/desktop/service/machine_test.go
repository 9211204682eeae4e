//go:build !darwin

package service

import "testing"

// Without Metal the engine runs on the CPU, and Diagnostics says why.
func TestEngineBackendWithoutMetal(t *testing.T) {
	s, _ := newService(t)
	b := s.machine.newBackend(1)()
	defer b.Close()
	c := s.machine.backendChoice()
	if b.Name() != "cpu" || c.Backend != "cpu" || c.Reason != "no Metal on this system" {
		t.Fatalf("backend %s, choice %+v", b.Name(), c)
	}
}
