package estimate

import (
	"testing"

	"nibble/engine/backend"
	_ "nibble/engine/cpu" // registers the CPU footprint the estimates use
	"nibble/internal/testdata"
)

// The estimator knows the backends linked into the binary, and its tests
// link only the CPU's: "metal" stands in for a second backend here, with
// the CPU's figures (metal/ring_test.go holds Metal's own footprint to the
// estimates).
func init() {
	f, err := backend.FootprintOf("cpu")
	if err != nil {
		panic(err)
	}
	backend.RegisterFootprint("metal", f)
}

func testdataDir(t testing.TB) string { return testdata.Dir(t) }
