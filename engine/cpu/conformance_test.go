package cpu

import (
	"fmt"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/backend/backendtest"
)

// The backend conformance suite, against float64 references, with the
// worker counts the engine runs: one, two (this machine's cores) and an odd
// count that divides no split count. Under the race detector, which slows
// it tenfold, only the three workers, where goroutines share the most.
func TestConformance(t *testing.T) {
	threads := []int{1, 2, 3}
	if raceEnabled {
		threads = []int{3}
	}
	for _, n := range threads {
		t.Run(fmt.Sprintf("%d threads", n), func(t *testing.T) {
			backendtest.Run(t, func(*testing.T) backend.Backend { return New(n) })
		})
	}
}
