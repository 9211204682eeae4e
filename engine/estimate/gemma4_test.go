package estimate_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"nibble/catalog"
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

// The catalog describes a Gemma 4 before its header is read: an entry with
// the shape of a synthetic Gemma 4 (global layers of their own head dim and
// kv heads, the last layers sharing K/V, per-layer inputs; dense and with
// experts) gives the estimate the file gives, term for term, except the
// weights (the entry's listed file size).
func TestCatalogGemma4MatchesFile(t *testing.T) {
	for _, moe := range []bool{false, true} {
		o := synth.DefaultOptions("gemma4")
		o.Layers, o.Embd, o.Heads, o.KVHeads, o.HeadDim, o.FF, o.Window = 9, 128, 4, 2, 32, 256, 64
		o.Type, o.Seed, o.VocabData = ggml.F16, 3, vocab.LlamaSPM
		o.Gemma4 = synth.Gemma4Options{GlobalEvery: 3, HeadDimGlobal: 64, KVHeadsGlobal: 1, SharedKVLayers: 3, PerLayerEmbd: 32}
		experts := ""
		if moe {
			o.Experts, o.ExpertsUsed, o.ExpertFF = 16, 4, 32
			o.Gemma4.SharedKVLayers, o.Gemma4.PerLayerEmbd = 0, 0
			experts = `"experts":16,"experts_used":4,"expert_ff":32,`
		}
		path := filepath.Join(t.TempDir(), "gemma4.gguf")
		if err := synth.Generate(path, o); err != nil {
			t.Fatal(err)
		}
		file, err := estimate.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		hp := file.HParams
		doc := fmt.Sprintf(`{"version":1,"models":[{"id":"g4","name":"G4","arch":"gemma4","params_b":1,"layers":%d,"embd":%d,"heads":%d,`+
			`"kv_heads":%d,"head_dim":%d,"head_dim_global":%d,"kv_heads_global":%d,"shared_kv_layers":%d,"per_layer_embd":%d,`+
			`"ff":%d,"vocab":%d,"ctx_train":%d,"attn_scale":1,"sliding_window":%d,"sliding_window_pattern":%d,"rope_base":%g,`+
			`"rms_eps":%g,"tied_output":true,%s"files":[{"quant":"F16","size_bytes":%d}]}]}`,
			o.Layers, o.Embd, o.Heads, o.KVHeads, o.HeadDim, o.Gemma4.HeadDimGlobal, o.Gemma4.KVHeadsGlobal, o.Gemma4.SharedKVLayers,
			o.Gemma4.PerLayerEmbd, o.FF, hp.Vocab, hp.CtxTrain, o.Window, o.Gemma4.GlobalEvery, hp.RopeBase, hp.RMSEps, experts, file.WeightsBytes)
		c, err := catalog.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		listed, err := estimate.FromCatalog(&c.Models[0], "")
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []int{48, 1024} {
			for _, kt := range kv.Types {
				opts := estimate.Options{Ctx: ctx, KV: kt, Batch: 32, Threads: 2}
				want, err := estimate.Compute(file, opts)
				if err != nil {
					t.Fatal(err)
				}
				got, err := estimate.Compute(listed, opts)
				if err != nil {
					t.Fatal(err)
				}
				if got.KV != want.KV || got.Scratch != want.Scratch || got.Overhead != want.Overhead || got.Total != want.Total {
					t.Errorf("moe %v ctx %d %s: catalog KV %d scratch %d overhead %d total %d; file %d %d %d %d", moe, ctx, kt,
						got.KV, got.Scratch, got.Overhead, got.Total, want.KV, want.Scratch, want.Overhead, want.Total)
				}
				if g, w := estimate.KVConfig(listed.HParams, opts), estimate.KVConfig(hp, opts); !reflect.DeepEqual(g, w) {
					t.Errorf("moe %v ctx %d %s: catalog cache %+v, file %+v", moe, ctx, kt, g, w)
				}
			}
		}
	}
}

// The catalog's Gemma 4 entries carry their global layers' shape: E4B
// stores K/V in its first 24 layers (20 sliding of 2 × 256 in a 512-slot
// ring, 4 global of 2 × 512), 26B-A4B and 31B in every layer, their global
// layers with 2 and 4 kv heads of 512.
func TestCatalogGemma4Shapes(t *testing.T) {
	for _, w := range []struct {
		id                      string
		kvLayers, globalKVHeads int
		slidingKVHeads          int
		perLayerEmbd            int
	}{
		{"gemma-4-e4b-it", 24, 2, 2, 256},
		{"gemma-4-26b-a4b-it", 30, 2, 8, 0},
		{"gemma-4-31b-it", 60, 4, 16, 0},
	} {
		m, err := catalog.ByID(w.id)
		if err != nil {
			t.Fatal(err)
		}
		d, err := estimate.FromCatalog(m, "")
		if err != nil {
			t.Fatal(err)
		}
		opts := estimate.Options{Ctx: 32768, KV: kv.F16}
		cfg := estimate.KVConfig(d.HParams, opts)
		var want int64
		for il := range w.kvLayers {
			n, kvh, hd := int64(32768), w.globalKVHeads, 512
			if il%6 != 5 {
				n, kvh, hd = int64(min(32768, m.SlidingWindow)), w.slidingKVHeads, 256
			}
			want += 2 * n * int64(kvh*hd) * 2
		}
		if cfg.Layers != w.kvLayers || cfg.HeadDimOf(5) != 512 || cfg.HeadDimOf(0) != 256 || cfg.KVHeadsOf(5) != w.globalKVHeads ||
			cfg.KVHeadsOf(0) != w.slidingKVHeads || d.HParams.PerLayerEmbd != w.perLayerEmbd {
			t.Errorf("%s: cache %+v, per-layer input %d", w.id, cfg, d.HParams.PerLayerEmbd)
		}
		e, err := estimate.Compute(d, opts)
		if err != nil {
			t.Fatal(err)
		}
		// The rings hold their window plus the residual rows a batch may add.
		if e.KV < want || e.KV > want+want/20 {
			t.Errorf("%s: KV %d bytes at 32K f16, want about %d", w.id, e.KV, want)
		}
		t.Logf("%s: KV %.2f GiB at 32K f16 (%d layers store K/V)", w.id, float64(e.KV)/(1<<30), cfg.Layers)
	}
}
