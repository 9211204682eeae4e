package estimate_test

import (
	"path/filepath"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
)

// A synthetic Gemma 4 (sliding and global layers of different head dims
// and kv heads, the last layers sharing K/V, per-layer inputs): the
// estimate's KV and scratch are what the CPU backend allocates, byte for
// byte, at every KV type; the layers that share K/V are counted once (the
// cache has a layer only for each layer that stores K/V).
func TestEstimateGemma4(t *testing.T) {
	o := synth.DefaultOptions("gemma4")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.HeadDim, o.FF, o.Window = 9, 128, 4, 2, 32, 256, 64
	o.Type, o.Seed, o.VocabData = ggml.F16, 3, vocab.LlamaSPM
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: 3, KVHeadsGlobal: 1, SharedKVLayers: 3, PerLayerEmbd: 32, GlobalVFromK: true}
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	d, err := estimate.FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(2)
	defer b.Close()
	m, err := engine.LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	huge := estimate.Simulated(1 << 40)
	for _, ctx := range []int{48, 1024} {
		for _, kt := range kv.Types {
			e, err := estimate.Compute(d, estimate.Options{Ctx: ctx, KV: kt, Batch: 32, Threads: b.Threads()})
			if err != nil {
				t.Fatal(err)
			}
			start := b.AllocatedBytes()
			s, err := engine.NewSession(m, b, engine.Options{Ctx: ctx, KV: kt, Batch: 32, Budget: &huge})
			if err != nil {
				t.Fatal(err)
			}
			session := b.AllocatedBytes() - start
			cfg := s.State.Cache.Config()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Six layers store K/V: four sliding of 2 heads × 32 (rings of
			// 64 slots), two global of 1 head × 64 over the whole context.
			if cfg.Layers != 6 || cfg.KVHeadsOf(2) != 1 || cfg.HeadDimOf(2) != 64 || cfg.HeadDimOf(4) != 32 || cfg.LayerSlots(4) != min(64, ctx) {
				t.Fatalf("cache %+v", cfg)
			}
			var want int64
			for l := range cfg.Layers {
				want += 2 * int64(cfg.LayerPlaneBytes(l))
			}
			counter := cpu.New(1)
			if _, err := kv.New(cfg, counter.AllocBytes); err != nil {
				t.Fatal(err)
			}
			cache := counter.AllocatedBytes()
			counter.Close()
			t.Logf("ctx %d %s: KV estimate %d, counted %d; scratch estimate %d, counted %d", ctx, kt, e.KV, cache, e.Scratch, session-cache)
			if e.KV != cache || cache != want || e.Scratch != session-cache {
				t.Errorf("ctx %d %s: estimate KV %d scratch %d, backend counted KV %d (six layers: %d) scratch %d",
					ctx, kt, e.KV, e.Scratch, cache, want, session-cache)
			}
		}
	}
}
