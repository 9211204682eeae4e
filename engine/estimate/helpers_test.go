package estimate

import (
	"testing"

	_ "nibble/engine/cpu" // registers the CPU footprint the estimates use
	"nibble/internal/testdata"
)

func testdataDir(t testing.TB) string { return testdata.Dir(t) }
