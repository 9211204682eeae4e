package kv

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCacheBytesMatchFormulaAndAllocator(t *testing.T) {
	for _, typ := range Types {
		for _, gs := range []int{32, 64} {
			cfg := Config{Type: typ, GroupSize: gs, Layers: 3, KVHeads: 2, HeadDim: 128, Ctx: 100}
			var handed int64
			calls := 0
			c, err := New(cfg, func(n int) []byte { handed += int64(n); calls++; return make([]byte, n) })
			if err != nil {
				t.Fatal(err)
			}
			want := cfg.Bytes()
			if typ == Q4 {
				// n_layer·n_kv_head·ctx·2·(D/2 + 4·D/gs)
				if f := int64(3 * 2 * 100 * 2 * (128/2 + 4*128/gs)); f != want {
					t.Fatalf("Config.Bytes %d, formula %d", want, f)
				}
			}
			if c.Bytes() != want || handed != want || calls != 2*cfg.Layers {
				t.Fatalf("%v gs %d: cache %d, allocator handed %d in %d calls, want %d in %d", typ, gs, c.Bytes(), handed, calls, want, 2*cfg.Layers)
			}
		}
	}
}

func TestAppendStoresWhatDequantizeReads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range Types {
		cfg := Config{Type: typ, GroupSize: 32, Layers: 2, KVHeads: 3, HeadDim: 64, Ctx: 10}
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		row := cfg.KVHeads * cfg.HeadDim
		k, v := make([]float32, 4*row), make([]float32, 4*row)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		if err := c.Append(1, 5, k, v, 4); err != nil {
			t.Fatal(err)
		}
		lv := c.Layer(1)
		got := make([]float32, cfg.HeadDim)
		tol := map[Type]float32{F16: 0.002, Q8: 0.03, Q4: 0.5}[typ]
		for tok := 0; tok < 4; tok++ {
			for h := 0; h < cfg.KVHeads; h++ {
				for pi, plane := range []*Plane{&lv.K, &lv.V} {
					lv.Dequantize(got, plane, h, 5+tok)
					src := [][]float32{k, v}[pi][tok*row+h*cfg.HeadDim:]
					for e, g := range got {
						if d := g - src[e]; d > tol || d < -tol {
							t.Fatalf("%v plane %d pos %d head %d elem %d: stored %v, appended %v", typ, pi, 5+tok, h, e, g, src[e])
						}
					}
				}
			}
		}
		// Layer 0 and other positions are untouched (zero codes, zero meta).
		lv.Dequantize(got, &lv.K, 0, 4)
		for _, g := range got {
			if g != 0 {
				t.Fatalf("%v: position 4 changed", typ)
			}
		}
	}
}

func TestBadInputsReturnErrors(t *testing.T) {
	if _, err := New(Config{Type: Q4, GroupSize: 48, Layers: 1, KVHeads: 1, HeadDim: 96, Ctx: 8}, nil); err == nil {
		t.Fatal("group size 48 accepted")
	}
	if _, err := New(Config{Type: Q4, GroupSize: 32, Layers: 1 << 20, KVHeads: 1 << 20, HeadDim: 128, Ctx: 1 << 40}, nil); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("absurd config: %v", err)
	}
	if _, err := New(Config{Type: F16, Layers: 1, KVHeads: 1, HeadDim: 8, Ctx: 8}, func(n int) []byte { return make([]byte, n-1) }); err == nil {
		t.Fatal("short allocation accepted")
	}
	c, err := New(Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 32*2)
	for _, tc := range []struct{ layer, pos, n int }{{1, 0, 1}, {-1, 0, 1}, {0, 7, 2}, {0, -1, 1}, {0, 0, 3}} {
		if err := c.Append(tc.layer, tc.pos, row, row, tc.n); err == nil {
			t.Fatalf("Append(layer %d, pos %d, n %d) accepted", tc.layer, tc.pos, tc.n)
		}
	}
}
