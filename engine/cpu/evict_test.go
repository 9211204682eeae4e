package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/engine/numeric"
)

// TestEvictedPositionsMatchAFullCache runs a sequence through an evicting
// cache as the forward pass does (RoPE at logical positions, a prefill batch,
// then decode steps that store and attend), then builds a cache that never
// evicts and holds exactly the surviving positions' K/V, rotated at their
// original positions, and checks that the last decode step and a prefill
// batch read the same attention from both.
func TestEvictedPositionsMatchAFullCache(t *testing.T) {
	const (
		heads, kvHeads, d = 8, 2, 64
		budget            = 48
		steps             = 150
	)
	b := New(2)
	defer b.Close()
	att := &backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: d, Scale: 0.2}
	rope := &backend.RoPE{Dims: d, Base: 10000, PosScale: 1}
	for _, typ := range kv.Types {
		for _, ev := range []kv.Eviction{kv.DefaultEviction(kv.EvictH2O, budget), {Policy: kv.EvictH2O, Budget: budget, Sinks: 4, Recent: 8},
			kv.DefaultEviction(kv.EvictWindow, budget)} {
			t.Run(typ.String()+"/"+ev.Policy.String(), func(t *testing.T) {
				base := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: 512, Rotate: typ == kv.Q4, Residual: 16}
				if typ == kv.F16 {
					base.Residual = 0
				}
				cfg := base
				cfg.Evict = ev
				c, err := b.NewKVCache(cfg, heads, 16)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				r := rand.New(rand.NewPCG(11, uint64(typ)))
				kRows, vRows := map[int][]float32{}, map[int][]float32{} // by logical position, after RoPE
				qT, kT, vT, out := b.Alloc(16*heads*d), b.Alloc(16*kvHeads*d), b.Alloc(16*kvHeads*d), b.Alloc(16*heads*d)
				fill := func(x backend.Tensor, n int) {
					for i := range f(x)[:n] {
						f(x)[i] = float32(r.NormFloat64())
					}
				}
				// step writes rows fresh rows at pos (a prefill batch above one row).
				step := func(c backend.KVCache, pos, rows int, record bool) {
					t.Helper()
					fill(qT, rows*heads*d)
					fill(kT, rows*kvHeads*d)
					fill(vT, rows*kvHeads*d)
					ps := make([]int32, rows)
					for i := range ps {
						ps[i] = int32(pos + i)
					}
					b.RoPE(qT, heads, d, rows, ps, rope)
					b.RoPE(kT, kvHeads, d, rows, ps, rope)
					if record {
						for i := 0; i < rows; i++ {
							kRows[pos+i] = slices.Clone(f(kT)[i*kvHeads*d : (i+1)*kvHeads*d])
							vRows[pos+i] = slices.Clone(f(vT)[i*kvHeads*d : (i+1)*kvHeads*d])
						}
					}
					if rows == 1 {
						b.KVStore(c, 0, kT, vT, pos, 1)
						b.AttendDecode(out, qT, c, 0, pos+1, att)
					} else {
						b.AttendPrefill(out, qT, kT, vT, c, 0, pos, rows, att)
						b.KVStore(c, 0, kT, vT, pos, rows)
					}
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				step(c, 0, 16, true)
				pos := 16
				for ; pos < steps; pos++ {
					step(c, pos, 1, true)
				}
				ec := c.(backend.EvictingCache)
				if !ec.Evicted() {
					t.Fatal("no eviction")
				}
				kept := [][]int{ec.Kept(0, 0), ec.Kept(0, 1)}
				held := len(kept[0])
				if held > budget || held < budget-budget/32 || len(kept[1]) != held || kept[0][held-1] != steps-1 {
					t.Fatalf("kept %v", kept[0])
				}
				// The reference: the kept rows in order, stored once, at
				// slots 0..held-1 of a cache that never evicts.
				ref, err := b.NewKVCache(base, heads, budget)
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				rk, rv := b.Alloc(budget*kvHeads*d), b.Alloc(budget*kvHeads*d)
				for i := 0; i < held; i++ {
					for h := 0; h < kvHeads; h++ {
						p := kept[h][i]
						copy(f(rk)[(i*kvHeads+h)*d:], kRows[p][h*d:(h+1)*d])
						copy(f(rv)[(i*kvHeads+h)*d:], vRows[p][h*d:(h+1)*d])
					}
				}
				b.KVStore(ref, 0, rk, rv, 0, held)
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				// The same new rows on both, at logical position steps on
				// the evicting cache and after its held slots on the
				// reference: a prefill batch read, then a decode step (which
				// may make the evicting cache drop positions: the reference
				// is rebuilt from what it then holds).
				compare := func(name string, rows int) {
					t.Helper()
					fill(qT, rows*heads*d)
					fill(kT, rows*kvHeads*d)
					fill(vT, rows*kvHeads*d)
					ps := make([]int32, rows)
					for i := range ps {
						ps[i] = int32(pos + i)
					}
					b.RoPE(qT, heads, d, rows, ps, rope)
					b.RoPE(kT, kvHeads, d, rows, ps, rope)
					got, want := make([]float32, rows*heads*d), make([]float32, rows*heads*d)
					b.AttendPrefill(out, qT, kT, vT, c, 0, pos, rows, att)
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
					b.Read(got, out, 0)
					b.AttendPrefill(out, qT, kT, vT, ref, 0, held, rows, att)
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
					b.Read(want, out, 0)
					if cos := numeric.Cosine(got, want); cos < 0.99999 {
						t.Fatalf("%s: cosine %.7f between the evicting cache and a full cache of its positions", name, cos)
					}
					if rows == 1 {
						// Decode: store on both, attend.
						b.KVStore(c, 0, kT, vT, pos, 1)
						b.AttendDecode(out, qT, c, 0, pos+1, att)
						if err := b.Sync(); err != nil {
							t.Fatal(err)
						}
						b.Read(got, out, 0)
						// The evicting cache dropped one position to take the
						// row: drop the same from the reference.
						now := [][]int{ec.Kept(0, 0), ec.Kept(0, 1)}
						ref2, err := b.NewKVCache(base, heads, budget)
						if err != nil {
							t.Fatal(err)
						}
						defer ref2.Close()
						kRows[pos], vRows[pos] = slices.Clone(f(kT)[:kvHeads*d]), slices.Clone(f(vT)[:kvHeads*d])
						for i := range now[0] {
							for h := 0; h < kvHeads; h++ {
								p := now[h][i]
								copy(f(rk)[(i*kvHeads+h)*d:], kRows[p][h*d:(h+1)*d])
								copy(f(rv)[(i*kvHeads+h)*d:], vRows[p][h*d:(h+1)*d])
							}
						}
						b.KVStore(ref2, 0, rk, rv, 0, len(now[0]))
						b.AttendDecode(out, qT, ref2, 0, len(now[0]), att)
						if err := b.Sync(); err != nil {
							t.Fatal(err)
						}
						b.Read(want, out, 0)
						if !slices.Equal(got, want) {
							t.Fatalf("%s: decode after eviction differs from a full cache of the same positions (cosine %.7f)", name, numeric.Cosine(got, want))
						}
					}
				}
				compare("prefill", 5)
				compare("decode", 1)
			})
		}
	}
}

// TestEvictionRefusals: sliding-window attention on an evicting cache is an
// error at Sync, not a wrong answer.
func TestEvictionRefusals(t *testing.T) {
	b := New(1)
	defer b.Close()
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 64, Evict: kv.DefaultEviction(kv.EvictH2O, 16)}
	c, err := b.NewKVCache(cfg, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, v, q, out := b.Alloc(32), b.Alloc(32), b.Alloc(64), b.Alloc(64)
	b.KVStore(c, 0, k, v, 0, 1)
	b.AttendDecode(out, q, c, 0, 1, &backend.Attention{Heads: 2, KVHeads: 1, HeadDim: 32, Scale: 0.1, Window: 8})
	if err := b.Sync(); err == nil {
		t.Error("sliding-window attention on an evicting cache was accepted")
	}
}
