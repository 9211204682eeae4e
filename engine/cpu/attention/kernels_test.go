package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
)

// TestKernelSetsAgree runs decode and prefill on odd shapes (head dims that
// leave vector tails, group size 64, GQA groups that are not multiples of
// the SIMD head batch, short blocks) with the portable and the SIMD kernels
// and checks both against float64 attention over the stored values.
func TestKernelSetsAgree(t *testing.T) {
	if !kern.q4Permuted {
		t.Skip("no SIMD kernels on this machine: the portable ones are the only set")
	}
	simdSet := kern
	defer func() { kern = simdSet }()
	pool := testPool(t, 2)
	type shape struct {
		typ   kv.Type
		d, gs int
	}
	var shapes []shape
	for _, typ := range []kv.Type{kv.Q4, kv.Q8} {
		for _, d := range []int{32, 64, 96, 160, 256, 512} {
			for _, gs := range []int{32, 64} {
				if d%gs == 0 {
					shapes = append(shapes, shape{typ, d, gs})
				}
			}
		}
	}
	for _, d := range []int{8, 24, 40, 80, 96, 200} {
		shapes = append(shapes, shape{kv.F16, d, 32})
	}
	r := rand.New(rand.NewPCG(4, 4))
	for _, s := range shapes {
		for _, g := range []int{1, 3, 4, 6, 9, 32} {
			p := Params{Heads: 2 * g, KVHeads: 2, HeadDim: s.d, Scale: 1 / float32(sqrt(s.d)), Window: 40 * (g % 2)}
			const n, rows = 200, 21
			name := fmt.Sprintf("%v d%d gs%d g%d w%d", s.typ, s.d, s.gs, g, p.Window)
			k, v := randomKV(r, p, n+rows, true)
			cache := newCache(t, p, s.typ, s.gs, n+rows, k, v, n)
			ws := NewWorkspace(p, n+rows, rows, 2, nil)
			kSt, vSt := storedKV(cache, n)
			q := randomVec(r, rows*p.Heads*s.d)
			kw := p.KVHeads * s.d
			ms := []int{1, 17, 45, n}
			refs := make([][]float64, len(ms))
			for i, m := range ms {
				refs[i] = decodeReference64(q, kSt, vSt, m, p)
			}
			var dec, pre [2][]float32
			for i, set := range []kernels{portable, simdSet} {
				kern = set
				dec[i] = make([]float32, p.Heads*s.d)
				pre[i] = make([]float32, rows*p.Heads*s.d)
				for mi, m := range ms {
					if err := Decode(pool, ws, dec[i], q, cache, 0, m, p); err != nil {
						t.Fatal(name, err)
					}
					if _, rel := headStats(dec[i], refs[mi], s.d); rel > maxStoredRel {
						t.Fatalf("%s kernels %d n %d: relative error %.3g", name, i, m, rel)
					}
				}
				if err := Prefill(pool, ws, pre[i], q, k[n*kw:], v[n*kw:], rows, cache, 0, n, p); err != nil {
					t.Fatal(name, err)
				}
			}
			// Scores reach hundreds with the outlier channel, so f32
			// summation order alone moves weights by ~1e-5 relative.
			for _, pair := range [][2][]float32{dec, pre} {
				want := make([]float64, len(pair[0]))
				for i, x := range pair[0] {
					want[i] = float64(x)
				}
				if _, rel := headStats(pair[1], want, s.d); rel > maxStoredRel {
					t.Fatalf("%s: simd and portable differ by %.3g (relative, worst head)", name, rel)
				}
			}
		}
	}
}
