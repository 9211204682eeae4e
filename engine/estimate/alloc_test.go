package estimate_test

import (
	"os"
	"path/filepath"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/kv"
)

// The estimate's KV + scratch is exactly what the CPU backend counts when a
// session is created (the lead's note tabulates the full comparison).
func TestEstimateMatchesCPUAllocations(t *testing.T) {
	wd, _ := os.Getwd()
	dir := filepath.Join(wd, "..", "..", "..", "shared", "testdata", "models")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared test data not found at %s", dir)
	}
	for _, name := range []string{"tiny-llama-spm-q4_0", "tiny-llama3-q8_0", "tiny-qwen2-q4_0"} {
		path := filepath.Join(dir, name+".gguf")
		d, err := estimate.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := engine.LoadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []int{512, 4096} {
			for _, kt := range kv.Types {
				b := cpu.New(2)
				o := engine.Options{Ctx: ctx, KV: kt, Batch: 512}
				if _, err := engine.NewSession(m, b, o); err != nil {
					t.Fatal(err)
				}
				e, err := estimate.Compute(d, estimate.Options{Ctx: ctx, KV: kt, Batch: 512, Threads: b.Threads()})
				if err != nil {
					t.Fatal(err)
				}
				if got := b.AllocatedBytes(); got != e.KV+e.Scratch {
					t.Errorf("%s ctx %d %s: backend allocated %d, estimate KV %d + scratch %d = %d",
						name, ctx, kt, got, e.KV, e.Scratch, e.KV+e.Scratch)
				}
				b.Close()
			}
		}
		m.Close()
	}
}
