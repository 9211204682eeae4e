package estimate

import (
	"math"
	"testing"

	"nibble/catalog"
	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
)

// Gemma 3's local layers keep only their window (kv.Config.LayerWindow), and
// the estimator counts them so: for the catalog's Gemma 3 4B at several
// contexts and every KV type, its KV term is what the CPU backend allocates
// for a cache whose five local layers of six hold 1024 positions (the
// allocation delta of NewKVCache, less the footprint's workspace), and at
// 128K it is the fraction of the all-global KV that the layer pattern
// predicts. The largest context that fits a budget grows accordingly, and
// another backend's estimate ("metal", the CPU's figures standing in for
// it) counts rings too.
func TestEstimateCountsSlidingWindowRings(t *testing.T) {
	const id = "gemma-3-4b-it"
	cm, err := catalog.ByID(id)
	if err != nil {
		t.Fatal(err)
	}
	d := catalogDesc(t, id)
	if cm.SlidingWindow != 1024 || cm.SlidingWindowPattern != 6 || cm.Layers != 34 {
		t.Fatalf("catalog %s: window %d, pattern %d, %d layers; the test expects 1024, 6, 34", id, cm.SlidingWindow, cm.SlidingWindowPattern, cm.Layers)
	}
	// The layer pattern as the catalog states it: layer il is local iff
	// il % pattern < pattern−1.
	windows, globals := make([]int, cm.Layers), 0
	for il := range windows {
		if il%cm.SlidingWindowPattern < cm.SlidingWindowPattern-1 {
			windows[il] = cm.SlidingWindow
		} else {
			globals++
		}
	}
	allGlobal := d
	allGlobal.HParams.Window = 0
	f, err := backend.FootprintOf("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []int{512, 4096, 32768, 131072} {
		for _, kt := range kv.Types {
			o := Options{Ctx: ctx, KV: kt, Batch: 512, Threads: 2}
			e, err := Compute(d, o)
			if err != nil {
				t.Fatal(err)
			}
			cfg := kv.Config{Type: kt, GroupSize: kv.DefaultGroupSize, Layers: cm.Layers, KVHeads: cm.KVHeads, HeadDim: cm.HeadDim, Ctx: ctx,
				Residual: kv.DefaultResidual(kt), LayerWindow: windows}
			b := cpu.New(2)
			before := b.AllocatedBytes()
			c, err := b.NewKVCache(cfg, cm.Heads, o.Batch)
			if err != nil {
				t.Fatal(err)
			}
			counted := b.AllocatedBytes() - before - f.WorkspaceBytes(cfg, cm.Heads, o.Batch, 2)
			c.Close()
			b.Close()
			if e.KV != counted {
				t.Errorf("ctx %d %v: estimated KV %d, the CPU backend allocated %d", ctx, kt, e.KV, counted)
			}
			full, err := Compute(allGlobal, o)
			if err != nil {
				t.Fatal(err)
			}
			// Per layer and plane: slots·bytes per position + residual
			// rows, slots the window (capped at ctx) on local layers.
			bpth, res := int64(kv.BytesPerTokenHead(kt, cm.HeadDim, kv.DefaultGroupSize)), int64(min(kv.DefaultResidual(kt), ctx))
			local, global := int64(min(ctx, cm.SlidingWindow)), int64(ctx)
			plane := func(slots int64) int64 { return slots*bpth + min(res, slots)*2*int64(cm.HeadDim) }
			wantRatio := float64(int64(globals)*plane(global)+int64(cm.Layers-globals)*plane(local)) / float64(int64(cm.Layers)*plane(global))
			ratio := float64(e.KV) / float64(full.KV)
			if math.Abs(ratio-wantRatio) > 1e-12 {
				t.Errorf("ctx %d %v: KV %d is %.5f of the all-global %d, want %.5f", ctx, kt, e.KV, ratio, full.KV, wantRatio)
			}
			if ctx == 131072 {
				t.Logf("128K %v: KV %s with rings, %s with every layer global: %.4f (5 global layers of 34 at 128K, 29 local at 1024)",
					kt, Human(e.KV), Human(full.KV), ratio)
			}
		}
	}
	// The largest context on a 16 GiB budget, q8 KV.
	o, budget := Options{KV: kv.Q8, Batch: 512, Threads: 2}, int64(16)<<30
	withRings, without := MaxContext(d, o, budget), MaxContext(allGlobal, o, budget)
	t.Logf("largest context in 16 GiB, q8 KV: %d with rings, %d with every layer global", withRings, without)
	if withRings <= 4*without {
		t.Errorf("largest context with rings %d, all-global %d: want more than 4×", withRings, without)
	}
	if e, err := Compute(d, Options{Ctx: withRings, KV: kv.Q8, Batch: 512, Threads: 2}); err != nil || e.Total > budget {
		t.Errorf("the largest context %d does not fit: %v, %v", withRings, e, err)
	}
	if e, err := Compute(d, Options{Ctx: withRings + 1, KV: kv.Q8, Batch: 512, Threads: 2}); err != nil || e.Total <= budget {
		t.Errorf("one more than the largest context %d fits: %v, %v", withRings, e, err)
	}
	// Every backend keeps rings, so the estimate of another counts them too.
	mo := Options{Ctx: 131072, KV: kv.Q4, Batch: 512, Backend: "metal"}
	em, err := Compute(d, mo)
	if err != nil {
		t.Fatal(err)
	}
	fm, err := Compute(allGlobal, mo)
	if err != nil {
		t.Fatal(err)
	}
	co, err := Compute(d, Options{Ctx: 131072, KV: kv.Q4, Batch: 512, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if em.KV != co.KV || em.KV >= fm.KV/4 || KVConfig(d.HParams, mo).LayerWindow == nil {
		t.Errorf("metal: KV %d with rings, %d on the CPU, %d all-global; Metal keeps rings as the CPU does", em.KV, co.KV, fm.KV)
	}
}
