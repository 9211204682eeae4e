package metal

import (
	"testing"

	"nibble/engine/backend"
	"nibble/engine/kv"
)

// The Metal kernels do not read sliding-window rings yet: a config asking
// for them gets full planes for every layer, its cache says so, and the
// backend and its footprint are no kv.RingReader, so states and the
// estimator ask for none.
func TestNoRingsOnMetal(t *testing.T) {
	b := newBackend(t)
	f, err := backend.FootprintOf("metal")
	if err != nil {
		t.Fatal(err)
	}
	if kv.ReadsRing(b) || kv.ReadsRing(f) {
		t.Fatal("the Metal backend or its footprint claims to keep rings")
	}
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 64, Ctx: 300, Residual: 64, LayerWindow: []int{64, 64, 0}}
	full := cfg
	full.LayerWindow = nil
	base := b.AllocatedBytes()
	c, err := b.NewKVCache(cfg, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := b.AllocatedBytes()-base, full.Bytes()+f.WorkspaceBytes(full, 4, 16, 0); got != want || c.Config().LayerWindow != nil {
		t.Errorf("NewKVCache counted %d bytes (config windows %v), want the full planes' %d (rings would be %d)", got, c.Config().LayerWindow, want, cfg.Bytes())
	}
}
