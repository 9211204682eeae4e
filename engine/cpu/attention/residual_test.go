package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
)

// windowReference is what a cache with a residual window of w holds for a
// read of positions [0, n), computed by hand: positions before n-w as their
// codes dequantize, the last w as the inputs rounded to f16.
func windowReference(c *kv.Cache, k, v []float32, n, w int) (rk, rv []float32) {
	rk, rv = storedKV(c, n)
	for i := max(0, n-w) * len(k) / c.Config().Ctx; i < n*len(k)/c.Config().Ctx; i++ {
		rk[i], rv[i] = half.Round(k[i]), half.Round(v[i])
	}
	return rk, rv
}

// TestDecodeResidualWindow appends a sequence row by row and in batches
// and decodes at lengths on both sides of the window's edge: the fused
// kernel must equal attention over the dequantized range plus the f16 tail,
// for sliding windows shorter and longer than the residual one and with
// the tail straddling a split.
func TestDecodeResidualWindow(t *testing.T) {
	const ctx = 700
	pool := testPool(t, 2)
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(3, 9))
	k, v := randomKV(r, p, ctx, false)
	row := p.KVHeads * p.HeadDim
	for _, typ := range []kv.Type{kv.Q8, kv.Q4} {
		for _, w := range []int{64, 300} {
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx, Residual: w}
			c, err := kv.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := kv.New(kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ws := NewWorkspace(p, ctx, 0, 2, nil)
			out := make([]float32, p.Heads*p.HeadDim)
			n := 0
			for _, next := range []int{1, 2, 63, 64, 65, 66, 200, 299, 300, 301, 540, 700} {
				// Single rows near the window's edge, a batch otherwise.
				step := 1
				if next-n > 3 {
					step = next - n
				}
				for ; n < next; n += step {
					if err := c.Append(0, n, k[n*row:], v[n*row:], step); err != nil {
						t.Fatal(err)
					}
					if err := plain.Append(0, n, k[n*row:], v[n*row:], step); err != nil {
						t.Fatal(err)
					}
				}
				rk, rv := windowReference(c, k, v, n, w)
				codesK, codesV := storedKV(plain, n)
				for _, window := range []int{0, 50, 400} {
					p.Window = window
					name := fmt.Sprintf("%v residual %d n %d window %d", typ, w, n, window)
					q := randomVec(r, p.Heads*p.HeadDim)
					if err := Decode(pool, ws, out, q, c, 0, n, p); err != nil {
						t.Fatal(name, err)
					}
					if _, rel := headStats(out, decodeReference64(q, rk, rv, n, p), p.HeadDim); rel > maxStoredRel {
						t.Fatalf("%s: relative error %.3g against the dequantized range plus the f16 tail", name, rel)
					}
					// Reading codes where the tail should be read is far outside that bound.
					if _, rel := headStats(out, decodeReference64(q, codesK, codesV, n, p), p.HeadDim); typ == kv.Q4 && n > 1 && rel < 10*maxStoredRel {
						t.Fatalf("%s: output is %.3g from the all-codes reference: the f16 tail was not read", name, rel)
					}
				}
			}
		}
	}
}

// TestPrefillReadsResidualWindow: prefill rows read the cached prefix
// through the window (codes, then the f16 tail) and their own batch in f16.
func TestPrefillReadsResidualWindow(t *testing.T) {
	const past, rows, w = 150, 6, 40
	pool := testPool(t, 2)
	p := Params{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(5, 1))
	k, v := randomKV(r, p, past+rows, false)
	rowW := p.KVHeads * p.HeadDim
	c, err := kv.New(kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: past + rows, Residual: w}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append(0, 0, k, v, past); err != nil {
		t.Fatal(err)
	}
	rk, rv := windowReference(c, k, v, past, w)
	for i := past * rowW; i < (past+rows)*rowW; i++ {
		rk, rv = append(rk, half.Round(k[i])), append(rv, half.Round(v[i]))
	}
	ws := NewWorkspace(p, past+rows, rows, 2, nil)
	q := randomVec(r, rows*p.Heads*p.HeadDim)
	out := make([]float32, len(q))
	if err := Prefill(pool, ws, out, q, k[past*rowW:], v[past*rowW:], rows, c, 0, past, p); err != nil {
		t.Fatal(err)
	}
	qw := p.Heads * p.HeadDim
	for i := 0; i < rows; i++ {
		want := decodeReference64(q[i*qw:(i+1)*qw], rk, rv, past+i+1, p)
		if _, rel := headStats(out[i*qw:(i+1)*qw], want, p.HeadDim); rel > maxStoredRel {
			t.Fatalf("row %d: relative error %.3g against the dequantized prefix, f16 tail and f16 batch", i, rel)
		}
	}
}
