package kv

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// evictCache makes a one-layer cache of typ with the eviction e.
func evictCache(t *testing.T, typ Type, residual int, e Eviction) *Cache {
	t.Helper()
	c, err := New(Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 256, Residual: residual, Evict: e}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rowsFor returns n rows of K and V for positions pos.., distinct per
// position and head.
func rowsFor(rng *rand.Rand, c *Cache, n int) (k, v []float32) {
	w := n * c.cfg.KVHeads * c.cfg.HeadDim
	k, v = make([]float32, w), make([]float32, w)
	for i := range k {
		k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	return k, v
}

// slotBytes is everything stored for (head, slot) of plane p: codes and
// metadata (or halves).
func slotBytes(c *Cache, p *Plane, head, slot int) []byte {
	cfg := c.cfg
	s := head*cfg.Slots() + slot
	d := cfg.HeadDim
	var out []byte
	switch cfg.Type {
	case F16:
		return slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&p.F16[s*d])), 2*d))
	case Q8:
		out = slices.Clone(p.Q8[s*d : (s+1)*d])
	case Q4:
		out = slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&p.Q4[s*d/8])), d/2))
	}
	m := 2 * d / cfg.GroupSize
	return append(out, unsafe.Slice((*byte)(unsafe.Pointer(&p.Meta[s*m])), 2*m)...)
}

// TestEvictionMovesCodesAsStored appends one position at a time past the
// budget and checks, after every step, that each slot holds byte for byte
// the codes and metadata its logical position got when it was stored, the
// residual ring's rows included: eviction moves, it never requantizes.
func TestEvictionMovesCodesAsStored(t *testing.T) {
	for _, typ := range Types {
		for _, e := range []Eviction{DefaultEviction(EvictH2O, 48), DefaultEviction(EvictWindow, 48), {Policy: EvictH2O, Budget: 40, Sinks: 3, Recent: 10}} {
			t.Run(typ.String()+"/"+e.Policy.String(), func(t *testing.T) {
				c := evictCache(t, typ, 16, e)
				rng := rand.New(rand.NewPCG(1, 2))
				stored := map[[3]int][]byte{} // (plane, head, position) → bytes
				var tails = map[[3]int][]uint16{}
				lv := c.Layer(0)
				pos := 0
				for step := 0; step < 120; step++ {
					n := 1
					if step%7 == 0 {
						n = 5 // small batches too
					}
					if sc := c.Scores(0); sc != nil {
						for i := range sc {
							sc[i] += rng.Float32()
						}
					}
					k, v := rowsFor(rng, c, n)
					if err := c.Append(0, pos, k, v, n); err != nil {
						t.Fatal(err)
					}
					phys, err := c.Physical(0, pos+n)
					if err != nil {
						t.Fatal(err)
					}
					for h := 0; h < 2; h++ {
						for i := 0; i < n; i++ {
							slot := phys - n + i
							stored[[3]int{0, h, pos + i}] = slotBytes(c, &lv.K, h, slot)
							stored[[3]int{1, h, pos + i}] = slotBytes(c, &lv.V, h, slot)
							if lv.TailHolds(slot) {
								tails[[3]int{0, h, pos + i}] = slices.Clone(lv.TailRow(&lv.K, h, slot))
								tails[[3]int{1, h, pos + i}] = slices.Clone(lv.TailRow(&lv.V, h, slot))
							}
						}
					}
					pos += n
					for h := 0; h < 2; h++ {
						kept := c.Kept(0, h)
						if len(kept) != phys || len(kept) > e.Budget {
							t.Fatalf("step %d head %d: %d kept, physical %d, budget %d", step, h, len(kept), phys, e.Budget)
						}
						for slot, p := range kept {
							for plane, pl := range []*Plane{&lv.K, &lv.V} {
								if !bytes.Equal(slotBytes(c, pl, h, slot), stored[[3]int{plane, h, p}]) {
									t.Fatalf("step %d head %d slot %d (position %d, plane %d): bytes differ from those stored", step, h, slot, p, plane)
								}
								if lv.TailHolds(slot) && !slices.Equal(lv.TailRow(pl, h, slot), tails[[3]int{plane, h, p}]) {
									t.Fatalf("step %d head %d slot %d (position %d, plane %d): residual row differs", step, h, slot, p, plane)
								}
							}
						}
					}
					if typ != F16 && (e.Recent >= 16 || e.Policy == EvictWindow) {
						// The ring keeps following the most recent positions.
						if got := lv.TailStart(0, phys); got != max(0, phys-16) {
							t.Fatalf("step %d: ring holds from slot %d, want %d", step, got, max(0, phys-16))
						}
					}
				}
				if !c.Evicted() {
					t.Fatal("Evicted() is false after 120+ positions in a budget of 48")
				}
			})
		}
	}
}

// TestEvictionPolicy checks what H2O keeps: the sinks, the recent window
// (the rows just stored included), the highest scores between them, in
// position order, within the budget; and what the window policy keeps.
func TestEvictionPolicy(t *testing.T) {
	e := Eviction{Policy: EvictH2O, Budget: 16, Sinks: 2, Recent: 4, PerHead: true}
	c := evictCache(t, Q4, 0, e)
	rng := rand.New(rand.NewPCG(3, 4))
	k, v := rowsFor(rng, c, 16)
	if err := c.Append(0, 0, k, v, 16); err != nil {
		t.Fatal(err)
	}
	// Head 0 favours positions 5, 7, 9, ...; head 1 positions 4, 6, 8, ...
	sc := c.Scores(0)
	for slot := 0; slot < 16; slot++ { // stride: the budget of 16 slots
		sc[slot] = float32(slot % 2)
		sc[16+slot] = float32(1 - slot%2)
	}
	sc[3] = 10 // head 0 keeps 3 above everything
	k, v = rowsFor(rng, c, 4)
	if err := c.Append(0, 16, k, v, 4); err != nil {
		t.Fatal(err)
	}
	// 4 dropped among slots [2, 12): the lowest scores, oldest first.
	got0, got1 := c.Kept(0, 0), c.Kept(0, 1)
	// Budget 16: 2 sinks + 4 recent (of the old positions) + 6 heavy + 4 new.
	if len(got0) != 16 || len(got1) != 16 {
		t.Fatalf("kept %d and %d positions, want the budget of 16", len(got0), len(got1))
	}
	for _, kept := range [][]int{got0, got1} {
		if !slices.IsSorted(kept) || kept[0] != 0 || kept[1] != 1 || !slices.Equal(kept[12:], []int{16, 17, 18, 19}) || !slices.Equal(kept[8:12], []int{12, 13, 14, 15}) {
			t.Fatalf("kept %v: want sinks 0 1, ascending, recent 12..15 and the new rows 16..19", kept)
		}
	}
	if want := []int{0, 1, 3, 5, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(got0, want) {
		t.Errorf("head 0 kept %v, want %v", got0, want)
	}
	if want := []int{0, 1, 2, 4, 6, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(got1, want) {
		t.Errorf("head 1 kept %v, want %v (ties dropped oldest first)", got1, want)
	}
	// Scores moved with their positions; the new rows start at 0.
	if sc[2] != 10 || sc[16+2] != 1 || sc[12] != 0 {
		t.Errorf("scores after the move: head 0 slot 2 = %g (want 10), head 1 slot 2 = %g (want 1), head 0 slot 12 = %g (want 0)", sc[2], sc[16+2], sc[12])
	}

	w := evictCache(t, F16, 0, DefaultEviction(EvictWindow, 10))
	for pos := 0; pos < 25; pos++ {
		k, v := rowsFor(rng, w, 1)
		if err := w.Append(0, pos, k, v, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := w.Kept(0, 1), []int{15, 16, 17, 18, 19, 20, 21, 22, 23, 24}; !slices.Equal(got, want) {
		t.Errorf("window kept %v, want %v", got, want)
	}
	if w.Scores(0) != nil {
		t.Error("the window policy keeps scores")
	}

	// Shared choice: one set per layer by the summed score.
	s := evictCache(t, F16, 0, Eviction{Policy: EvictH2O, Budget: 8, Sinks: 1, Recent: 2})
	k, v = rowsFor(rng, s, 8)
	if err := s.Append(0, 0, k, v, 8); err != nil {
		t.Fatal(err)
	}
	ss := s.Scores(0)
	ss[4], ss[8+5] = 3, 2.5 // head 0 likes 4, head 1 likes 5: both kept by sum
	k, v = rowsFor(rng, s, 3)
	if err := s.Append(0, 8, k, v, 3); err != nil {
		t.Fatal(err)
	}
	want := []int{0, 4, 5, 6, 7, 8, 9, 10}
	if a, b := s.Kept(0, 0), s.Kept(0, 1); !slices.Equal(a, want) || !slices.Equal(b, want) {
		t.Errorf("shared choice kept %v and %v, want %v for both heads", a, b, want)
	}
}

// TestEvictionSequenceRules: position 0 starts over, a rewind after an
// eviction or a gap is an error, and a batch above the budget is refused.
func TestEvictionSequenceRules(t *testing.T) {
	c := evictCache(t, Q8, 8, DefaultEviction(EvictH2O, 16))
	rng := rand.New(rand.NewPCG(5, 6))
	k, v := rowsFor(rng, c, 16)
	if err := c.Append(0, 0, k, v, 10); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(0, 5, k, v, 3); err != nil { // rewind before any eviction
		t.Fatalf("rewind before eviction: %v", err)
	}
	if err := c.Append(0, 8, k, v, 16); err != nil {
		t.Fatal(err)
	}
	if !c.Evicted() {
		t.Fatal("no eviction after 24 positions in a budget of 16")
	}
	for _, tc := range []struct {
		pos, n int
		want   string
	}{{20, 1, "rewinds"}, {30, 1, "gap"}, {24, 17, "exceed the eviction budget"}} {
		kk, vv := rowsFor(rng, c, tc.n)
		err := c.Append(0, tc.pos, kk, vv, tc.n)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Append(%d, %d rows) = %v, want an error about %q", tc.pos, tc.n, err, tc.want)
		}
	}
	if _, err := c.Physical(0, 3); err == nil {
		t.Error("Physical of an evicted count succeeded")
	}
	if err := c.Append(0, 0, k, v, 4); err != nil || c.Evicted() {
		t.Fatalf("start over at 0: %v, evicted %v", err, c.Evicted())
	}
	if got := c.Kept(0, 0); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("after starting over kept %v", got)
	}
	for _, bad := range []Eviction{{Policy: EvictH2O, Budget: 0}, {Policy: EvictWindow, Budget: 257}, {Budget: 5}, {Policy: EvictH2O, Budget: 8, Sinks: -1}} {
		if _, err := New(Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 256, Evict: bad}, nil); err == nil {
			t.Errorf("eviction %+v accepted", bad)
		}
	}
}

// TestEvictionBytes: the planes hold the budget, and Bytes counts what New
// allocates.
func TestEvictionBytes(t *testing.T) {
	for _, e := range []Eviction{{}, DefaultEviction(EvictWindow, 64), DefaultEviction(EvictH2O, 64)} {
		cfg := Config{Type: Q4, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 64, Ctx: 256, Residual: 16, Evict: e}
		var got int64
		c, err := New(cfg, func(n int) []byte { got += int64(n); return make([]byte, n) })
		if err != nil {
			t.Fatal(err)
		}
		if got != cfg.Bytes() || c.Bytes() != cfg.Bytes() {
			t.Errorf("%v: allocated %d, Bytes %d, cache %d", e.Policy, got, cfg.Bytes(), c.Bytes())
		}
		full := Config{Type: Q4, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 64, Ctx: 256, Residual: 16}
		if e.Policy != EvictNone && cfg.Bytes() >= full.Bytes()/2 {
			t.Errorf("%v at a quarter of the context: %d bytes, the full cache %d", e.Policy, cfg.Bytes(), full.Bytes())
		}
	}
}
