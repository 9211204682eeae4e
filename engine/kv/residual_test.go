package kv

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
)

func TestResidualWindowBytes(t *testing.T) {
	for _, typ := range Types {
		for _, w := range []int{1, 16, 100, 300} {
			cfg := Config{Type: typ, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 64, Ctx: 100, Residual: w}
			var handed int64
			calls := 0
			c, err := New(cfg, func(n int) []byte { handed += int64(n); calls++; return make([]byte, n) })
			if err != nil {
				t.Fatal(err)
			}
			ring := 0
			if typ != F16 {
				ring = min(w, 100) // capped at the context
			}
			// n_layer·n_kv_head·2·(ctx·bytes_per_token_head + window·2·D)
			want := int64(3 * 2 * 2 * (100*BytesPerTokenHead(typ, 64, 32) + ring*2*64))
			if cfg.Bytes() != want || c.Bytes() != want || handed != want || calls != 2*cfg.Layers {
				t.Fatalf("%v residual %d: config %d, cache %d, allocator handed %d in %d calls, want %d in %d",
					typ, w, cfg.Bytes(), c.Bytes(), handed, calls, want, 2*cfg.Layers)
			}
			if got := len(c.Layer(0).K.Tail); got != 2*ring*64 {
				t.Fatalf("%v residual %d: ring of %d halves, want %d", typ, w, got, 2*ring*64)
			}
		}
	}
	for _, r := range []int{-1, MaxResidual + 1} {
		if _, err := New(Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 8, Residual: r}, nil); err == nil {
			t.Fatalf("residual %d accepted", r)
		}
	}
}

// TestResidualWindowRing appends a sequence in single rows and batches
// (one longer than the window) and checks after each append that the ring
// holds exactly the last W positions, as f16 of what the codes were made
// from (K transformed), and that the codes and metadata are byte for byte
// those of a cache without a window.
func TestResidualWindowRing(t *testing.T) {
	const ctx, w, d, heads = 64, 8, 64, 2
	r := rand.New(rand.NewPCG(7, 7))
	row := heads * d
	k, v := make([]float32, ctx*row), make([]float32, ctx*row)
	for i := range k {
		k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	lambda := make([]float32, heads*d)
	for i := range lambda {
		lambda[i] = float32(int(1) << (i % 3))
	}
	for _, typ := range []Type{Q8, Q4} {
		cfg := Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: heads, HeadDim: d, Ctx: ctx, Rotate: true, Smooth: true, Residual: w}
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Residual = 0
		plain, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cc := range []*Cache{c, plain} {
			if err := cc.SetLambda(0, lambda); err != nil {
				t.Fatal(err)
			}
		}
		lv := c.Layer(0)
		key := make([]float32, d)
		n := 0
		for _, step := range []int{1, 1, 3, 1, 1, 12, 1, 5, 1, 1, 20} {
			for _, cc := range []*Cache{c, plain} {
				if err := cc.Append(0, n, k[n*row:], v[n*row:], step); err != nil {
					t.Fatal(err)
				}
			}
			n += step
			if got, want := lv.TailStart(0, n), max(0, n-w); got != want {
				t.Fatalf("%v n %d: tail starts at %d, want %d", typ, n, got, want)
			}
			if lo := max(0, n-2); lv.TailStart(lo, n) != lo {
				t.Fatalf("%v n %d: a read from %d has its tail at %d", typ, n, lo, lv.TailStart(lo, n))
			}
			for p := max(0, n-w); p < n; p++ {
				for h := 0; h < heads; h++ {
					src := (p*heads + h) * d
					kt := lv.TransformKey(key, k[src:src+d], h)
					for i, x := range lv.TailRow(&lv.K, h, p) {
						if x != half.FromFloat32(kt[i]) {
							t.Fatalf("%v n %d: ring K of (head %d, pos %d)[%d] is %#x, want f16 of the stored key %#x", typ, n, h, p, i, x, half.FromFloat32(kt[i]))
						}
					}
					for i, x := range lv.TailRow(&lv.V, h, p) {
						if x != half.FromFloat32(v[src+i]) {
							t.Fatalf("%v n %d: ring V of (head %d, pos %d)[%d] wrong", typ, n, h, p, i)
						}
					}
				}
			}
			ringBytes := 2 * len(lv.K.Tail)
			for i, pl := range []*Plane{&lv.K, &lv.V} {
				other := &plain.Layer(0).K
				if i == 1 {
					other = &plain.Layer(0).V
				}
				if !bytes.Equal(pl.Raw[:len(pl.Raw)-ringBytes], other.Raw) {
					t.Fatalf("%v n %d: plane %d codes differ from a cache without a window", typ, n, i)
				}
			}
		}
	}
}

// TestResidualWindowRewind: appending at an earlier position (a session
// truncated and extended) drops the ring rows of the positions it rewrote
// and of those after them; a read then takes f16 only where the ring still
// holds the very position.
func TestResidualWindowRewind(t *testing.T) {
	const w = 4
	cfg := Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 16, Residual: w}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 16*32)
	if err := c.Append(0, 0, x, x, 10); err != nil { // ring: 6..9
		t.Fatal(err)
	}
	lv := c.Layer(0)
	if err := c.Append(0, 7, x, x, 1); err != nil { // rewinds to 7: ring keeps 6, gets 7 again
		t.Fatal(err)
	}
	for p, want := range map[int]bool{5: false, 6: true, 7: true, 8: false, 9: false} {
		if lv.TailHolds(p) != want {
			t.Fatalf("after the rewind the ring holds position %d: %v, want %v", p, lv.TailHolds(p), want)
		}
	}
	if got := lv.TailStart(0, 8); got != 6 {
		t.Fatalf("tail of [0, 8) starts at %d, want 6", got)
	}
	// Positions 8 and 9 were dropped: a read of [0, 10) cannot use the ring.
	if got := lv.TailStart(0, 10); got != 10 {
		t.Fatalf("tail of [0, 10) starts at %d, want 10 (no f16 rows for 8 and 9)", got)
	}
}
