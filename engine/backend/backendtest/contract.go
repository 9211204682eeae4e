package backendtest

import (
	"math"
	"slices"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/kv"
)

// Memory: tensors come zeroed and counted, and Free gives them back; a cache
// counts exactly its bytes and the workspace its backend's Footprint
// declares (what the estimator relies on), and Close gives them back;
// freeing and closing twice is harmless.
func testMemory(h *harness) {
	base := h.b.AllocatedBytes()
	t := h.b.Alloc(3000)
	if got := h.b.AllocatedBytes() - base; got != 4*3000 {
		h.t.Fatalf("Alloc(3000) counted %d bytes, want 12000", got)
	}
	if x := h.read(t, 0, 3000); slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) {
		h.t.Fatal("Alloc returned a tensor that is not zeroed")
	}
	h.b.Free(t)
	h.b.Free(t)
	if got := h.b.AllocatedBytes(); got != base {
		h.t.Fatalf("after Free the count is %d, want %d", got, base)
	}
	f, err := backend.FootprintOf(h.b.Name())
	if err != nil {
		h.t.Fatalf("the estimator cannot size this backend: %v", err)
	}
	threads := 0
	if th, ok := h.b.(interface{ Threads() int }); ok {
		threads = th.Threads()
	}
	for _, c := range []struct {
		cfg          kv.Config
		heads, batch int
	}{
		{kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 3, KVHeads: 8, HeadDim: 128, Ctx: 4096, Smooth: true}, 32, 512},
		{kv.Config{Type: kv.F16, Layers: 2, KVHeads: 2, HeadDim: 64, Ctx: 100}, 2, 1},
		{kv.Config{Type: kv.Q8, GroupSize: 64, Layers: 1, KVHeads: 4, HeadDim: 256, Ctx: 1000, Rotate: true}, 16, 64},
	} {
		c2, err := h.b.NewKVCache(c.cfg, c.heads, c.batch)
		if err != nil {
			h.t.Fatalf("NewKVCache(%+v): %v", c.cfg, err)
		}
		want := c.cfg.Bytes() + f.WorkspaceBytes(c.cfg, c.heads, c.batch, threads)
		if got := h.b.AllocatedBytes() - base; got != want {
			h.t.Errorf("NewKVCache(%+v, %d heads, batch %d) counted %d bytes; cache %d + footprint workspace %d = %d",
				c.cfg, c.heads, c.batch, got, c.cfg.Bytes(), want-c.cfg.Bytes(), want)
		}
		if err := c2.Close(); err != nil {
			h.t.Fatal(err)
		}
		c2.Close()
		if got := h.b.AllocatedBytes(); got != base {
			h.t.Fatalf("after closing the cache the count is %d, want %d", got, base)
		}
	}
	c := h.newCache(kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: 10}, 1, 1)
	if err := h.b.ReadKV(c, 0, make([]byte, 10), make([]byte, 10)); err == nil {
		h.t.Error("ReadKV into buffers of the wrong size succeeded")
	}
	n := layoutOf(c.Config()).bytes()
	if err := h.b.ReadKV(c, 1, make([]byte, n), make([]byte, n)); err == nil {
		h.t.Error("ReadKV of layer 1 of 1 succeeded")
	}
}

// Host slices given to an op are copied when it is issued: changing them
// after the call, before Sync, changes nothing.
func testHostSlicesCopied(h *harness) {
	const vocab, cols = 10, 64
	data := ggmltest.RandomWeights(h.rng, ggml.Q8_0, vocab, cols, 1)
	table := h.weight("token_embd", ggml.Q8_0, vocab, cols, data)
	want := h.dequantized(ggml.Q8_0, vocab, cols, data)
	tokens := []int32{3, 1, 4}
	dst := h.b.Alloc(len(tokens) * cols)
	h.b.Embed(dst, table, tokens)
	tokens[0], tokens[1], tokens[2] = 9, 9, 9
	got := h.read(dst, 0, len(tokens)*cols)
	for i, tok := range []int{3, 1, 4} {
		closeTo(h.t, "embed after its tokens changed", got[i*cols:(i+1)*cols], want[tok*cols:(tok+1)*cols], 0, math.Ldexp(maxAbs(want), -20))
	}

	const heads, d = 2, 64
	xs := h.normals(3*heads*d, 1)
	rope := func(mutate bool) []float32 {
		pos := []int32{5, 1000, 7}
		r := &backend.RoPE{Dims: d, Base: 10000, FreqFactors: make([]float32, d/2)}
		for i := range r.FreqFactors {
			r.FreqFactors[i] = float32(1 + i%4)
		}
		x := h.upload(xs, heads*d)
		h.b.RoPE(x, heads, d, 3, pos, r)
		if mutate {
			pos[0], pos[1] = 99, 99
			r.FreqFactors[0], r.FreqFactors[1] = 1000, 1000
		}
		return h.read(x, 0, len(xs))
	}
	if a, b := rope(true), rope(false); !equal(a, b) {
		h.t.Fatal("rope: changing positions or frequency factors after the call changed its result")
	}

	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: d, Ctx: 20, Smooth: true}
	k, v := h.kvRows(20, cfg.KVHeads, d)
	lambda := kv.Calibrate(k, 20, cfg.KVHeads, d)
	stored := func(mutate bool) []byte {
		c := h.newCache(cfg, 2, 20)
		l := slices.Clone(lambda)
		h.b.KVSetSmoothing(c, 0, l)
		if mutate {
			for i := range l {
				l[i] = 64
			}
		}
		h.store(c, 0, k, v, 0)
		kp, _ := h.planes(c, 0)
		return kp
	}
	if !slices.Equal(stored(true), stored(false)) {
		h.t.Fatal("kv smoothing: changing the factors after the call changed what was stored")
	}
}

// An op whose arguments break the contract (a programming error, not data)
// reports it at the next Sync instead of crashing; the Sync after is clean.
func testErrorsAtSync(h *harness) {
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 16}
	c := h.newCache(cfg, 4, 4)
	row := h.b.Alloc(4 * 64 * 4)
	a := &backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	for what, issue := range map[string]func(){
		"kv store past the context":         func() { h.b.KVStore(c, 0, row, row, 15, 2) },
		"decode over more than the context": func() { h.b.AttendDecode(row, row, c, 0, 17, a) },
		"decode with other heads than the cache's": func() {
			h.b.AttendDecode(row, row, c, 0, 1, &backend.Attention{Heads: 2, KVHeads: 2, HeadDim: 64, Scale: 0.125})
		},
		"prefill past the context":          func() { h.b.AttendPrefill(row, row, row, row, c, 0, 14, 3, a) },
		"smoothing factors of another size": func() { h.b.KVSetSmoothing(c, 0, []float32{1, 2}) },
	} {
		issue()
		if err := h.b.Sync(); err == nil {
			h.t.Errorf("%s: Sync reported nothing", what)
		}
		if err := h.b.Sync(); err != nil {
			h.t.Errorf("%s: the next Sync still reports %v", what, err)
		}
	}
}
