package cpu

import (
	"math"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/half"
	"nibble/engine/kv"
)

// The backend hands the layer's sink weight to the attention kernels:
// prefill and decode against float64 softmax with the extra exp(sink − max)
// term over f16 K/V; a sink row of the wrong width is an error at Sync.
func TestAttentionSinks(t *testing.T) {
	b := New(2)
	defer b.Close()
	const heads, kvHeads, d, rows = 4, 2, 64, 6
	a := &backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: d, Scale: 0.125,
		Sinks: f32Weight(t, b, []float32{-1, 0.5, 3, 8})}
	c, err := b.NewKVCache(kv.Config{Type: kv.F16, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: 16}, heads, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fill := func(n, seed int) *Tensor {
		x := b.Alloc(n).(*Tensor)
		for i := range x.D {
			x.D[i] = float32(math.Sin(float64(i*seed+seed)) * 2)
		}
		return x
	}
	q, k, v := fill(rows*heads*d, 3), fill((rows+1)*kvHeads*d, 5), fill((rows+1)*kvHeads*d, 7)
	out := b.Alloc(rows * heads * d).(*Tensor)
	b.AttendPrefill(out, q, k, v, c, 0, 0, rows, a)
	b.KVStore(c, 0, k, v, 0, rows+1)
	dec := b.Alloc(heads * d).(*Tensor)
	b.AttendDecode(dec, q, c, 0, rows+1, a) // q's first row as the next token's query
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	sinks := []float64{-1, 0.5, 3, 8}
	ref := func(qrow []float32, n int) []float64 {
		o := make([]float64, heads*d)
		for h := 0; h < heads; h++ {
			kvh := h / (heads / kvHeads)
			s := make([]float64, n)
			m := sinks[h]
			for tk := range s {
				for e := 0; e < d; e++ {
					s[tk] += float64(qrow[h*d+e]) * float64(half.Round(k.D[(tk*kvHeads+kvh)*d+e]))
				}
				s[tk] *= 0.125
				m = math.Max(m, s[tk])
			}
			sum := math.Exp(sinks[h] - m)
			for tk := range s {
				w := math.Exp(s[tk] - m)
				sum += w
				for e := 0; e < d; e++ {
					o[h*d+e] += w * float64(half.Round(v.D[(tk*kvHeads+kvh)*d+e]))
				}
			}
			for e := 0; e < d; e++ {
				o[h*d+e] /= sum
			}
		}
		return o
	}
	check := func(what string, got []float32, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5 {
				t.Fatalf("%s element %d: got %g, want %g", what, i, got[i], want[i])
			}
		}
	}
	for r := 0; r < rows; r++ {
		check("prefill", out.D[r*heads*d:(r+1)*heads*d], ref(q.D[r*heads*d:(r+1)*heads*d], r+1))
	}
	check("decode", dec.D, ref(q.D[:heads*d], rows+1))

	a.Sinks = f32Weight(t, b, []float32{1, 2, 3})
	b.AttendDecode(dec, q, c, 0, rows+1, a)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "3 sinks for 4 heads") {
		t.Fatalf("sinks of the wrong width: %v", err)
	}
}
