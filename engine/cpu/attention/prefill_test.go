package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/numeric"
)

// looseCosine is the quality check here: exactness is held against the
// stored values, and the acceptance figures are TestDecodeMatchesReference's
// (over eight kv heads; two heads, as here, scatter more).
var looseCosine = map[kv.Type]float64{kv.Q4: 0.98, kv.Q8: 0.9995, kv.F16: 0.9999}

// TestPrefillThenDecode prefills rows after a cached prefix, stores them,
// decodes the next token, and checks both against float64 causal attention
// over what the cache holds (prefix and the decode step quantized, prefill's
// own rows through f16) and, loosely, over the original values. With the
// 100× K channel, the smoothing is calibrated on the first rows written
// (the prefill's when past is 0, the prefix's otherwise).
func TestPrefillThenDecode(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		pool := testPool(t, 2)
		for _, typ := range kv.Types {
			for _, c := range []struct {
				d, g, past, rows, window int
				outlier                  bool
			}{
				{128, 4, 0, 40, 0, false}, {64, 1, 45, 70, 0, false}, {128, 2, 300, 33, 0, false}, {64, 8, 100, 50, 20, false}, {256, 3, 37, 5, 40, false},
				{128, 4, 0, 40, 0, true}, {64, 2, 45, 70, 0, true}, {256, 3, 37, 5, 40, true},
			} {
				name := fmt.Sprintf("%v d%d g%d past%d rows%d w%d outlier=%v", typ, c.d, c.g, c.past, c.rows, c.window, c.outlier)
				p := Params{Heads: 2 * c.g, KVHeads: 2, HeadDim: c.d, Scale: 1 / float32(sqrt(c.d)), Window: c.window}
				if c.outlier {
					p.Scale = outlierScale(c.d)
				}
				r := rand.New(rand.NewPCG(uint64(c.d), uint64(c.past)))
				total := c.past + c.rows + 1
				k, v := randomKV(r, p, total, c.outlier)
				cache := newCache(t, p, typ, 32, total, k, v, c.past)
				if c.past == 0 {
					calibrate(t, cache, k, c.rows)
				}
				ws := NewWorkspace(p, total, c.rows, 2, nil)
				qw, kw := p.Heads*c.d, p.KVHeads*c.d
				q := randomVec(r, c.rows*qw)
				out := make([]float32, c.rows*qw)
				if err := Prefill(pool, ws, out, q, k[c.past*kw:], v[c.past*kw:], c.rows, cache, 0, c.past, p); err != nil {
					t.Fatal(name, err)
				}
				// What prefill attends to: the stored prefix, new rows through f16.
				kEff, vEff := storedKV(cache, c.past)
				for _, x := range k[c.past*kw : (c.past+c.rows)*kw] {
					kEff = append(kEff, half.Round(x))
				}
				for _, x := range v[c.past*kw : (c.past+c.rows)*kw] {
					vEff = append(vEff, half.Round(x))
				}
				for i := 0; i < c.rows; i++ {
					got := out[i*qw : (i+1)*qw]
					pos := c.past + i
					if _, rel := headStats(got, decodeReference64(q[i*qw:(i+1)*qw], kEff, vEff, pos+1, p), c.d); rel > maxStoredRel {
						t.Fatalf("%s row %d: relative error %.3g vs causal reference", name, i, rel)
					}
					if cos := numeric.Cosine(got, decodeReference64(q[i*qw:(i+1)*qw], k, v, pos+1, p)); cos < looseCosine[typ] {
						t.Fatalf("%s row %d: cosine %.6f vs original values", name, i, cos)
					}
				}
				// Store the rows and the next token, then decode it.
				if err := cache.Append(0, c.past, k[c.past*kw:], v[c.past*kw:], c.rows+1); err != nil {
					t.Fatal(err)
				}
				qd := randomVec(r, qw)
				dec := make([]float32, qw)
				if err := Decode(pool, ws, dec, qd, cache, 0, total, p); err != nil {
					t.Fatal(name, err)
				}
				kSt, vSt := storedKV(cache, total)
				if _, rel := headStats(dec, decodeReference64(qd, kSt, vSt, total, p), c.d); rel > maxStoredRel {
					t.Fatalf("%s decode after prefill: relative error %.3g", name, rel)
				}
				if cos := numeric.Cosine(dec, decodeReference64(qd, k, v, total, p)); cos < looseCosine[typ] {
					t.Fatalf("%s decode after prefill: cosine %.6f vs original values", name, cos)
				}
			}
		}
	})
}

// TestPrefillF16EqualsReference: with an f16 cache, prefill over the whole
// prompt is float64 causal attention to f16 precision.
func TestPrefillF16EqualsReference(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(5, 5))
	rows := 100
	k, v := randomKV(r, p, rows, false)
	cache := newCache(t, p, kv.F16, 32, rows, k, v, 0)
	ws := NewWorkspace(p, rows, rows, 1, nil)
	q := randomVec(r, rows*p.Heads*p.HeadDim)
	out := make([]float32, len(q))
	if err := Prefill(testPool(t, 1), ws, out, q, k, v, rows, cache, 0, 0, p); err != nil {
		t.Fatal(err)
	}
	qw := p.Heads * p.HeadDim
	for i := 0; i < rows; i++ {
		if _, rel := headStats(out[i*qw:(i+1)*qw], decodeReference64(q[i*qw:(i+1)*qw], k, v, i+1, p), p.HeadDim); rel > maxF16Rel {
			t.Fatalf("row %d: relative error %.3g", i, rel)
		}
	}
}
