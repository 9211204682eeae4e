package estimate_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
	"nibble/internal/testdata"
	"nibble/internal/testmodel"
)

// The estimate's KV and scratch terms are what the CPU backend's allocator
// really counts, byte for byte: for every test model and a
// Llama-3.2-1B-shaped sparse file, at three contexts and every KV type, a
// session is created and AllocatedBytes read around it. The KV term is what
// building that session's cache config counts (kv.New through another CPU
// backend's allocator, as the backend does); the scratch term is the rest
// of the session (activations and attention workspace).
func TestEstimateMatchesCPUAllocations(t *testing.T) {
	td := testdata.Dir(t)
	paths := []string{}
	for _, name := range testdata.Models {
		paths = append(paths, filepath.Join(td, "models", name))
	}
	// Mixtures of experts: every expert's weights resident, routing
	// activations in the scratch.
	paths = append(paths, filepath.Join("..", "testdata", "hf", "tiny-qwen3moe.gguf"))
	mixtral := filepath.Join(t.TempDir(), "synth-mixtral-q8_0.gguf")
	o := synth.DefaultOptions(synth.Mixtral)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Type = 2, 256, 4, 2, 128, ggml.Q8_0
	o.VocabFrom = filepath.Join(td, "models", "tiny-llama-spm-f16.gguf")
	if err := synth.Generate(mixtral, o); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, mixtral)
	oneB := filepath.Join(t.TempDir(), "llama-1b-shape-q4_0.gguf")
	testmodel.WriteSparse(t, oneB, 16, 2048, 32, 8, 8192, 32000, ggml.Q4_0, true, nil)
	paths = append(paths, oneB)
	huge := estimate.Simulated(1 << 40)
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %6s %4s %4s %12s %12s %12s %12s\n", "model", "ctx", "kv", "win", "KV est", "KV counted", "scratch est", "counted")
	for _, path := range paths {
		d, err := estimate.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b := cpu.New(2)
		m, err := engine.LoadModel(path, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []int{512, 4096, 32768} {
			for _, kt := range kv.Types {
				// The session's residual window: the type's default on the CPU
				// backend, none, and an explicit one (at one context).
				residuals := []int{0}
				if ctx == 512 {
					residuals = append(residuals, -1, 200)
				}
				for _, residual := range residuals {
					window := residual // what the estimator must resolve it to on the CPU
					switch {
					case residual == 0:
						window = kv.DefaultResidual(kt)
					case residual < 0:
						window = 0
					}
					e, err := estimate.Compute(d, estimate.Options{Ctx: ctx, KV: kt, KVResidual: residual, Batch: 512, Threads: b.Threads()})
					if err != nil {
						t.Fatal(err)
					}
					start := b.AllocatedBytes()
					s, err := engine.NewSession(m, b, engine.Options{Ctx: ctx, KV: kt, KVResidual: residual, Batch: 512, Budget: &huge})
					if err != nil {
						t.Fatal(err)
					}
					session := b.AllocatedBytes() - start
					cfg := s.State.Cache.Config()
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					counter := cpu.New(1)
					if _, err := kv.New(cfg, counter.AllocBytes); err != nil {
						t.Fatal(err)
					}
					cache := counter.AllocatedBytes()
					counter.Close()
					scratch := session - cache
					fmt.Fprintf(&table, "%-28s %6d %4s %4d %12d %12d %12d %12d\n", filepath.Base(path), ctx, kt, cfg.Window(), e.KV, cache, e.Scratch, scratch)
					if cfg.Window() != min(window, ctx) && kt != kv.F16 {
						t.Errorf("%s ctx %d %s: the session's cache has a window of %d, want %d", filepath.Base(path), ctx, kt, cfg.Window(), window)
					}
					if e.KV != cache || e.Scratch != scratch {
						t.Errorf("%s ctx %d %s residual %d: estimate KV %d scratch %d, backend counted KV %d scratch %d",
							filepath.Base(path), ctx, kt, window, e.KV, e.Scratch, cache, scratch)
					}
				}
			}
		}
		m.Close()
		b.Close()
	}
	t.Logf("estimate terms vs CPU backend allocations:\n%s", table.String())
}
