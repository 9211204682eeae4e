package attention

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
)

// probsReference adds to want[kvh][t] the softmax probabilities each query
// head of q (rows × Heads·D) gives keys keys(kvh, t), t ≤ limit(row), in
// float64.
func probsReference(want [][]float64, q []float32, rows int, p Params, keys func(kvh, t int) []float32, limit func(row int) int) {
	d, g := p.HeadDim, p.group()
	for r := 0; r < rows; r++ {
		n := limit(r) + 1
		for h := 0; h < p.Heads; h++ {
			kvh := h / g
			qh := q[(r*p.Heads+h)*d : (r*p.Heads+h+1)*d]
			s := make([]float64, n)
			m := math.Inf(-1)
			for t := range s {
				var dot float64
				for i, x := range keys(kvh, t) {
					dot += float64(qh[i]) * float64(x)
				}
				s[t] = dot * float64(p.Scale)
				m = max(m, s[t])
			}
			var sum float64
			for t := range s {
				s[t] = math.Exp(s[t] - m)
				sum += s[t]
			}
			for t := range s {
				want[kvh][t] += s[t] / sum
			}
		}
	}
}

// TestScoreAccumulation checks that prefill (two batches, the second over
// a cached prefix read from codes and the residual ring) and decode add to
// an H2O cache's scores exactly the softmax probabilities each key got,
// summed over the kv head's query heads, against a float64 reference over
// the keys as the kernels read them.
func TestScoreAccumulation(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	for _, typ := range kv.Types {
		t.Run(typ.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(typ)))
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 256, Residual: 16,
				Evict: kv.DefaultEviction(kv.EvictH2O, 128)}
			c, err := kv.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			pool := testPool(t, 3)
			ws := NewWorkspace(p, cfg.Slots(), 64, pool.Threads(), nil)
			sc, err := NewScoreScratch(p, cfg.Slots(), 64, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := [][]float64{make([]float64, 128), make([]float64, 128)}
			check := func(stage string, n int) {
				t.Helper()
				got := c.Scores(0)
				for kvh := range want {
					for s := 0; s < n; s++ {
						if g, w := float64(got[kvh*128+s]), want[kvh][s]; math.Abs(g-w) > 2e-4*max(1, w) {
							t.Fatalf("%s: kv head %d slot %d: score %.6f, want %.6f", stage, kvh, s, g, w)
						}
					}
				}
			}
			lv := c.Layer(0)
			key := func(kvh, pos int) []float32 {
				dst := make([]float32, 64)
				originalKey(dst, lv, kvh, pos)
				return dst
			}
			rounded := func(k []float32, row0 int) func(kvh, t int) []float32 {
				return func(kvh, t int) []float32 {
					if t < row0 {
						return key(kvh, t)
					}
					src := k[((t-row0)*2+kvh)*64 : ((t-row0)*2+kvh+1)*64]
					out := make([]float32, 64)
					for i, x := range src {
						out[i] = half.Round(x)
					}
					return out
				}
			}
			out := make([]float32, 64*8*64)
			past := 0
			for _, rows := range []int{40, 20} {
				k, v := randomKV(r, p, rows, false)
				q := randomVec(r, rows*p.Heads*p.HeadDim)
				probsReference(want, q, rows, p, rounded(k, past), func(row int) int { return past + row })
				if err := PrefillAccumulate(pool, ws, sc, out, q, k, v, rows, c, 0, past, p); err != nil {
					t.Fatal(err)
				}
				if err := c.Append(0, past, k, v, rows); err != nil {
					t.Fatal(err)
				}
				past += rows
				check("prefill", past)
			}
			for step := 0; step < 3; step++ {
				k, v := randomKV(r, p, 1, false)
				q := randomVec(r, p.Heads*p.HeadDim)
				if err := c.Append(0, past, k, v, 1); err != nil {
					t.Fatal(err)
				}
				past++
				probsReference(want, q, 1, p, key, func(int) int { return past - 1 })
				if err := DecodeAccumulate(pool, ws, sc, out, q, c, 0, past, p); err != nil {
					t.Fatal(err)
				}
				check("decode", past)
			}
			// Decode's output is Decode's.
			q := randomVec(r, p.Heads*p.HeadDim)
			plain := make([]float32, len(q))
			if err := Decode(pool, ws, plain, q, c, 0, past, p); err != nil {
				t.Fatal(err)
			}
			if err := DecodeAccumulate(pool, ws, sc, out, q, c, 0, past, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain, out[:len(plain)]) {
				t.Error("DecodeAccumulate's output differs from Decode's")
			}
		})
	}
}
