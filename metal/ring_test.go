//go:build linux

package metal_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"nibble/catalog"
	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/metal"
)

// The Metal backend keeps sliding-window layers in rings, as the CPU does:
// the estimator counts rings on Metal, and NewKVCache allocates what the estimator says. For the
// catalog's Gemma 3 4B (five local layers of six, window 1024) at 8K f16
// and 32K q4, the cache's allocation is the estimate's KV term plus the
// footprint's workspace, its config keeps the windows, each layer's planes
// are kv.Config.LayerPlaneBytes (ReadKV takes exactly those), and the KV
// term is well below the all-global one.
func TestRingsOnMetal(t *testing.T) {
	b := newBackend(t)
	f, err := backend.FootprintOf("metal")
	if err != nil {
		t.Fatal(err)
	}
	cm, err := catalog.ByID("gemma-3-4b-it")
	if err != nil {
		t.Fatal(err)
	}
	d, err := estimate.FromCatalog(cm, "")
	if err != nil {
		t.Fatal(err)
	}
	allGlobal := d
	allGlobal.HParams.Window = 0
	for _, o := range []estimate.Options{
		{Ctx: 8192, KV: kv.F16, Batch: 512, Backend: "metal"},
		{Ctx: 32768, KV: kv.Q4, Batch: 512, Backend: "metal"},
	} {
		e, err := estimate.Compute(d, o)
		if err != nil {
			t.Fatal(err)
		}
		full, err := estimate.Compute(allGlobal, o)
		if err != nil {
			t.Fatal(err)
		}
		cfg := estimate.KVConfig(d.HParams, o)
		rings := 0
		for l := range cfg.Layers {
			if cfg.LayerRing(l) > 0 {
				rings++
			}
		}
		if rings != 29 {
			t.Fatalf("ctx %d %v: %d ring layers of %d (windows %v), want Gemma 3 4B's 29 local layers", o.Ctx, o.KV, rings, cfg.Layers, cfg.LayerWindow)
		}
		heads := d.HParams.Heads
		base := b.AllocatedBytes()
		c, err := b.NewKVCache(cfg, heads, e.Batch)
		if err != nil {
			t.Fatal(err)
		}
		got := b.AllocatedBytes() - base
		want := e.KV + f.WorkspaceBytes(cfg, heads, e.Batch, 0)
		if got != want || !slices.Equal(c.Config().LayerWindow, cfg.LayerWindow) {
			t.Errorf("ctx %d %v: NewKVCache allocated %d bytes (windows %v), the estimate's KV and workspace are %d", o.Ctx, o.KV, got, c.Config().LayerWindow, want)
		}
		for _, l := range []int{0, 5} { // a local layer and a global one
			n := cfg.LayerPlaneBytes(l)
			if err := b.ReadKV(c, l, make([]byte, n), make([]byte, n)); err != nil {
				t.Errorf("ctx %d %v: ReadKV of layer %d: %v", o.Ctx, o.KV, l, err)
			}
		}
		c.Close()
		t.Logf("ctx %d %v: KV %s with rings (allocated), %s with every layer global (%.3f)", o.Ctx, o.KV,
			estimate.Human(e.KV), estimate.Human(full.KV), float64(e.KV)/float64(full.KV))
		if !(float64(e.KV) < 0.5*float64(full.KV)) {
			t.Errorf("ctx %d %v: KV %d with rings, %d all-global: the rings save too little", o.Ctx, o.KV, e.KV, full.KV)
		}
	}
}

// setFloats writes x into the Metal tensor t (emulator buffers are host
// memory).
func setFloats(t backend.Tensor, x []float32) {
	r := metal.TensorRegion(t)
	mem := r.Buf.Bytes()[r.Off:]
	for i, v := range x {
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(v))
	}
}

// A sliding-window layer through the Metal backend's own methods, against
// the CPU backend's: the planes after stores that wrap the ring (ReadKV,
// bytes equal), decode attention that reads the wrapped window (within
// 2e-5 of the largest output), a read the ring no longer holds after a
// rewind (an error, as on the CPU), a window wider than the ring (an
// error), and where the sequence can go on (Evicted, ResumableFrom).
func TestMetalRingLayer(t *testing.T) {
	b := newBackend(t)
	cb := cpu.New(1)
	defer cb.Close()
	cfg := kv.Config{Type: kv.Q8, GroupSize: 32, Layers: 2, KVHeads: 1, HeadDim: 64, Ctx: 64, Residual: 8, LayerWindow: []int{16, 0}}
	const heads = 2
	mc, err := b.NewKVCache(cfg, heads, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	cc, err := cb.NewKVCache(cfg, heads, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r := rand.New(rand.NewPCG(91, 92))
	w := cfg.KVHeads * cfg.HeadDim
	store := func(pos, rows int) {
		k, v := make([]float32, rows*w), make([]float32, rows*w)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		mk, mv := b.Alloc(rows*w), b.Alloc(rows*w)
		setFloats(mk, k)
		setFloats(mv, v)
		for l := range cfg.Layers {
			b.KVStore(mc, l, mk, mv, pos, rows)
			cb.KVStore(cc, l, cpuTensorOf(cb, k), cpuTensorOf(cb, v), pos, rows)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := cb.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	store(0, 40) // a batch longer than the ring: [24, 40) stay
	store(40, 3) // wraps
	n := cfg.LayerPlaneBytes(0)
	gk, gv, wk, wv := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
	if err := b.ReadKV(mc, 0, gk, gv); err != nil {
		t.Fatal(err)
	}
	if err := cb.ReadKV(cc, 0, wk, wv); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gk, wk) || !bytes.Equal(gv, wv) {
		t.Fatalf("the ring layer's planes (%d bytes) differ from the CPU's", n)
	}
	a := &backend.Attention{Heads: heads, KVHeads: 1, HeadDim: 64, Scale: 0.125, Window: 16}
	q := make([]float32, heads*64)
	for i := range q {
		q[i] = float32(2 * r.NormFloat64())
	}
	mq, mo := b.Alloc(len(q)), b.Alloc(len(q))
	setFloats(mq, q)
	co := cb.Alloc(len(q))
	b.AttendDecode(mo, mq, mc, 0, 43, a)
	cb.AttendDecode(co, cpuTensorOf(cb, q), cc, 0, 43, a)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := cb.Sync(); err != nil {
		t.Fatal(err)
	}
	got, want := make([]float32, len(q)), make([]float32, len(q))
	b.Read(got, mo, 0)
	cb.Read(want, co, 0)
	var scale, worst float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if !(worst <= 2e-5*scale) {
		t.Errorf("decode over the wrapped ring: error %.3g of max %.3g", worst, scale)
	}
	ec := mc.(backend.EvictingCache)
	rc := mc.(interface{ ResumableFrom(int) int })
	// The ring holds [27, 43): the sequence can go on at 42 or 43, not
	// before (a query at 41 would need 26).
	if !ec.Evicted() || rc.ResumableFrom(43) != 43 || rc.ResumableFrom(42) != 42 || rc.ResumableFrom(41) != 0 {
		t.Errorf("after a wrap: evicted %v, resumable from 43: %d, 42: %d, 41: %d; want true, 43, 42, 0",
			ec.Evicted(), rc.ResumableFrom(43), rc.ResumableFrom(42), rc.ResumableFrom(41))
	}
	// A rewind to 38 keeps [27, 38): decode at 38 would read [22, 38).
	store(38, 1)
	b.AttendDecode(mo, mq, mc, 0, 38, a)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "no longer holds") {
		t.Errorf("decode of positions the ring lost: %v", err)
	}
	wide := *a
	wide.Window = 20
	b.AttendDecode(mo, mq, mc, 0, 39, &wide)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "ring of 16 slots") {
		t.Errorf("a window of 20 on a ring of 16: %v", err)
	}
}

// cpuTensorOf is x in a CPU backend tensor.
func cpuTensorOf(b *cpu.Backend, x []float32) backend.Tensor {
	t := b.Alloc(len(x))
	copy(t.(*cpu.Tensor).D, x)
	return t
}
