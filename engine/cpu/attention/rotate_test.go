package attention

import (
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
)

func newRotatedCache(t *testing.T, p Params, typ kv.Type, ctx int, rotate bool) *kv.Cache {
	t.Helper()
	c, err := kv.New(kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx, Rotate: rotate}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A rotated f16 cache gives the same attention as an unrotated one, through
// prefill (staged new rows and the cached prefix) and decode: q is rotated
// exactly as the stored K. Head dims 96 and 80 take the general transform
// (Hadamard blocks mixed by a DCT-II), 128 the plain Hadamard one.
func TestRotationKeepsAttention(t *testing.T) {
	pool := testPool(t, 2)
	for _, d := range []int{128, 96, 80} {
		p := Params{Heads: 8, KVHeads: 2, HeadDim: d, Scale: 1 / float32(sqrt(d))}
		r := rand.New(rand.NewPCG(4, uint64(d)))
		const past, rows = 300, 40
		k, v := randomKV(r, p, past+rows+1, false)
		q := randomVec(r, (rows+1)*p.Heads*p.HeadDim)
		qw, kw := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
		outs := [2][]float32{}
		for i, rotate := range []bool{false, true} {
			c := newRotatedCache(t, p, kv.F16, past+rows+1, rotate)
			ws := NewWorkspace(p, past+rows+1, rows, 2, nil)
			if err := c.Append(0, 0, k, v, past); err != nil {
				t.Fatal(err)
			}
			out := make([]float32, (rows+1)*qw)
			if err := Prefill(pool, ws, out, q, k[past*kw:], v[past*kw:], rows, c, 0, past, p); err != nil {
				t.Fatal(err)
			}
			if err := c.Append(0, past, k[past*kw:], v[past*kw:], rows+1); err != nil {
				t.Fatal(err)
			}
			if err := Decode(pool, ws, out[rows*qw:], q[rows*qw:], c, 0, past+rows+1, p); err != nil {
				t.Fatal(err)
			}
			outs[i] = out
		}
		want := make([]float64, len(outs[0]))
		for i, x := range outs[0] {
			want[i] = float64(x)
		}
		if _, rel := headStats(outs[1], want, p.HeadDim); rel > 2e-3 {
			t.Fatalf("d %d: rotated vs unrotated f16 attention: relative error %.3g", d, rel)
		}
	}
}
