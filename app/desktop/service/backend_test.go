//go:build !darwin

package service

import "testing"

// Without Metal the engine runs on the CPU, and Diagnostics says why.
func TestEngineBackendWithoutMetal(t *testing.T) {
	b := engineBackend(1)()
	defer b.Close()
	c, ok := backendChoice()
	if !ok || b.Name() != "cpu" || c.Backend != "cpu" || c.Reason != "no Metal on this system" || estimateBackend() != "cpu" {
		t.Fatalf("backend %s, choice %+v (%v)", b.Name(), c, ok)
	}
}
