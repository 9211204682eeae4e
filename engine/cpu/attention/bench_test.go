package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
)

// BenchmarkDecode times one layer's decode step (D 128, 32 query heads,
// 8 kv heads) per variant and context length: go test -bench Decode. The
// MB/s column is K/V bytes of the cache read per second (the dequant
// baseline's f32 traffic comes on top).
func BenchmarkDecode(b *testing.B) {
	p := Params{Heads: 32, KVHeads: 8, HeadDim: 128, Scale: 0.0884}
	pool := testPool(b, 0)
	for _, n := range []int{1024, 8192, 32768} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		k, v := randomKV(r, p, n, false)
		q, out := randomVec(r, p.Heads*p.HeadDim), make([]float32, p.Heads*p.HeadDim)
		ws := NewWorkspace(p, n, 0, pool.Threads(), nil)
		caches := map[kv.Type]*kv.Cache{}
		for _, t := range kv.Types {
			caches[t] = newCache(b, p, t, 32, n, k, v, n)
		}
		buf, err := NewDequantBuffers(p, n)
		if err != nil {
			b.Fatal(err)
		}
		perPos := int64(n) * int64(p.KVHeads) * 2 // K and V rows per step
		for _, c := range []struct {
			name string
			typ  kv.Type // what the step reads
			run  func() error
		}{
			{"fused_q4", kv.Q4, func() error { return Decode(pool, ws, out, q, caches[kv.Q4], 0, n, p) }},
			{"dequant_q4", kv.Q4, func() error { return DecodeDequantThenAttend(pool, buf, out, q, caches[kv.Q4], 0, n, p) }},
			{"f16", kv.F16, func() error { return Decode(pool, ws, out, q, caches[kv.F16], 0, n, p) }},
			{"q8", kv.Q8, func() error { return Decode(pool, ws, out, q, caches[kv.Q8], 0, n, p) }},
		} {
			b.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(b *testing.B) {
				b.SetBytes(perPos * int64(kv.BytesPerTokenHead(c.typ, p.HeadDim, 32)))
				for b.Loop() {
					if err := c.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPrefill times a 256-row prefill after 1024 cached positions.
func BenchmarkPrefill(b *testing.B) {
	p := Params{Heads: 32, KVHeads: 8, HeadDim: 128, Scale: 0.0884}
	pool := testPool(b, 0)
	const past, rows = 1024, 256
	r := rand.New(rand.NewPCG(2, 2))
	k, v := randomKV(r, p, past+rows, false)
	q, out := randomVec(r, rows*p.Heads*p.HeadDim), make([]float32, rows*p.Heads*p.HeadDim)
	ws := NewWorkspace(p, past+rows, rows, pool.Threads(), nil)
	kw := p.KVHeads * p.HeadDim
	for _, t := range kv.Types {
		c := newCache(b, p, t, 32, past+rows, k, v, past)
		b.Run(t.String(), func(b *testing.B) {
			for b.Loop() {
				if err := Prefill(pool, ws, out, q, k[past*kw:], v[past*kw:], rows, c, 0, past, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
