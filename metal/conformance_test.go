//go:build linux

package metal

import (
	"encoding/binary"
	"math"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/backend/backendtest"
	"nibble/engine/ggml"
)

// The backend conformance suite (engine/backend/backendtest) against the
// Metal backend on the MSL emulator.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend { return newBackend(t) })
}

// Closing twice, and closing caches and mappings after the backend, is
// harmless; a tensor freed before Sync stays valid for the ops encoded
// before it.
func TestCloseAndDeferredFree(t *testing.T) {
	b := newBackend(t)
	base := b.AllocatedBytes()
	x := b.Alloc(64)
	b.Free(x)
	b.Free(x)
	if got := b.AllocatedBytes(); got != base {
		t.Fatalf("after Free the count is %d, want %d", got, base)
	}
	// Freed before the Sync that runs the op: the buffer outlives the op.
	region := make([]byte, 4*2*64)
	for i := 0; i < 2*64; i++ {
		binary.LittleEndian.PutUint32(region[4*i:], math.Float32bits(float32(i)))
	}
	m, err := b.MapWeights(region, []backend.WeightDesc{{Name: "table", Type: ggml.F32, Rows: 2, Cols: 64}})
	if err != nil {
		t.Fatal(err)
	}
	y := b.Alloc(64)
	b.Embed(y, m.Weights()[0], []int32{1})
	b.Free(y)
	m.Close()
	if err := b.Sync(); err != nil {
		t.Fatalf("Sync after freeing a tensor and closing a mapping that encoded work uses: %v", err)
	}
	m.Close()
	b.Add(x, x, 64)
	if err := b.Sync(); err == nil {
		t.Error("an op on a freed tensor reported nothing at Sync")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
