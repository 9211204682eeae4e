//go:build linux

package metal_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/backend/backendtest"
	"nibble/engine/ggml"
	"nibble/engine/kv"
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

// MapWeights refuses, naming the tensor, a type without kernels and an
// offset a buffer binding cannot have; the footprint declares exactly what
// a cache allocates besides its planes (whose residual window ring
// cfg.Bytes() counts), and both it and the backend read that window.
func TestMapWeightsAndFootprint(t *testing.T) {
	b := newBackend(t)
	region := make([]byte, 4096)
	for _, bad := range []backend.WeightDesc{
		{Name: "iq4", Type: ggml.IQ4_NL, Rows: 1, Cols: 32, Offset: 0},
		{Name: "unaligned", Type: ggml.F32, Rows: 1, Cols: 16, Offset: 2},
	} {
		if m, err := b.MapWeights(region, []backend.WeightDesc{bad}); err == nil {
			m.Close()
			t.Errorf("MapWeights accepted %+v", bad)
		} else if !strings.Contains(err.Error(), bad.Name) {
			t.Errorf("%+v: error %q does not name the tensor", bad, err)
		}
	}
	f, err := backend.FootprintOf("metal")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []kv.Config{
		{Type: kv.Q4, GroupSize: 32, Layers: 4, KVHeads: 2, HeadDim: 64, Ctx: 333, Smooth: true},
		{Type: kv.Q8, GroupSize: 64, Layers: 2, KVHeads: 8, HeadDim: 128, Ctx: 64, Smooth: true, Rotate: true},
		{Type: kv.F16, Layers: 1, KVHeads: 1, HeadDim: 256, Ctx: 10, Smooth: true},
		{Type: kv.Q4, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 128, Ctx: 333, Smooth: true, Residual: 64},
		{Type: kv.Q8, GroupSize: 32, Layers: 1, KVHeads: 4, HeadDim: 64, Ctx: 30, Residual: 64}, // the ring capped at 30
	} {
		base := b.AllocatedBytes()
		c, err := b.NewKVCache(cfg, 4*cfg.KVHeads, 48)
		if err != nil {
			t.Fatal(err)
		}
		want := cfg.Bytes() + f.WorkspaceBytes(cfg, 4*cfg.KVHeads, 48, 0)
		if got := b.AllocatedBytes() - base; got != want {
			t.Errorf("%+v: NewKVCache counted %d bytes, the footprint says %d", cfg, got, want)
		}
		if cfg.Smooths() && f.WorkspaceBytes(cfg, 4*cfg.KVHeads, 48, 0) < int64(4*cfg.Layers*cfg.KVHeads*cfg.HeadDim) {
			t.Errorf("%+v: the footprint leaves out the λ buffers", cfg)
		}
		n := cfg.PlaneBytes()
		if err := b.ReadKV(c, cfg.Layers-1, make([]byte, n), make([]byte, n)); err != nil {
			t.Errorf("%+v: ReadKV of planes of %d bytes (the ring included): %v", cfg, n, err)
		}
		c.Close()
		if got := b.AllocatedBytes(); got != base {
			t.Errorf("%+v: after Close the count is %d, want %d", cfg, got, base)
		}
	}
	if f.OverheadBytes(backend.Shape{}, 0) <= 0 {
		t.Error("no base overhead")
	}
}

// Attention with score soft-capping (Gemma 2) runs (the kernels' cap is
// held to the CPU's in metal/shaders and by TestFamiliesMatchCPU); a cap
// that is negative, infinite or NaN is refused at Sync, naming it.
func TestAttentionSoftcapChecked(t *testing.T) {
	b := newBackend(t)
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: 8}
	c, err := b.NewKVCache(cfg, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, out := b.Alloc(2*64), b.Alloc(2*64)
	k, v := b.Alloc(64), b.Alloc(64)
	b.KVStore(c, 0, k, v, 0, 1)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, capping := range []float32{50, -1, float32(math.Inf(1)), float32(math.NaN())} {
		a := &backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 64, Scale: 0.125, Softcap: capping}
		for name, op := range map[string]func(){
			"decode":  func() { b.AttendDecode(out, q, c, 0, 1, a) },
			"prefill": func() { b.AttendPrefill(out, q, k, v, c, 0, 1, 1, a) },
		} {
			op()
			err := b.Sync()
			switch {
			case capping == 50 && err != nil:
				t.Errorf("%s with soft-cap 50: %v", name, err)
			case capping != 50 && (err == nil || !strings.Contains(err.Error(), "soft-cap")):
				t.Errorf("%s with soft-cap %v: Sync error %v, want one naming the soft-cap", name, capping, err)
			}
		}
	}
}
