package estimate_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/internal/testdata"
	"nibble/internal/testmodel"
)

// The estimate is checked against reality: for every test model and a
// Llama-3.2-1B-shaped synthetic file, at three contexts and every KV type,
// estimated weights + KV + scratch must be within 3% of what the CPU backend
// counts when a session is created plus the mapped weights (it is exact by
// construction; the test keeps it so).
func TestEstimateMatchesCPUAllocations(t *testing.T) {
	td := testdata.Dir(t)
	paths := []string{}
	for _, name := range testdata.Models {
		paths = append(paths, filepath.Join(td, "models", name))
	}
	oneB := filepath.Join(t.TempDir(), "llama-1b-shape-q4_0.gguf")
	testmodel.WriteSparse(t, oneB, 16, 2048, 32, 8, 8192, 32000, ggml.Q4_0, true, nil)
	paths = append(paths, oneB)
	huge := estimate.Simulated(1 << 40)
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %6s %4s %14s %14s %7s\n", "model", "ctx", "kv", "estimate B", "actual B", "diff")
	for _, path := range paths {
		d, err := estimate.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := engine.LoadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []int{512, 4096, 32768} {
			for _, kt := range kv.Types {
				b := cpu.New(2)
				o := engine.Options{Ctx: ctx, KV: kt, Batch: 512, Budget: &huge}
				if _, err := engine.NewSession(m, b, o); err != nil {
					t.Fatal(err)
				}
				e, err := estimate.Compute(d, estimate.Options{Ctx: ctx, KV: kt, Batch: 512, Threads: b.Threads()})
				if err != nil {
					t.Fatal(err)
				}
				actual := b.AllocatedBytes() + d.WeightsBytes
				diff := float64(e.Allocated()-actual) / float64(actual)
				fmt.Fprintf(&table, "%-28s %6d %4s %14d %14d %+6.2f%%\n", filepath.Base(path), ctx, kt, e.Allocated(), actual, 100*diff)
				if math.Abs(diff) > 0.03 {
					t.Errorf("%s ctx %d %s: estimate %d vs actual %d (%+.2f%%)", path, ctx, kt, e.Allocated(), actual, 100*diff)
				}
				b.Close()
			}
		}
		m.Close()
	}
	t.Logf("estimate vs CPU backend allocations + mapped weights:\n%s", table.String())
}
