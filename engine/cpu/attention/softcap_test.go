package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
)

// Soft-capping (Gemma 2) replaces each score s by c·tanh(s/c) before the
// softmax, in every kernel path: decode over codes (q4, q8, f16), over the
// residual window's f16 ring, and prefill's new rows; with both kernel sets.
// Scores here reach ±60 against a cap of 20, so a kernel that skipped the
// cap would miss the reference by far more than the tolerance (checked).
func TestSoftcapMatchesReference(t *testing.T) {
	sets := map[string]kernels{"portable": portable, "in use": kern}
	for name, set := range sets {
		t.Run(name, func(t *testing.T) {
			saved := kern
			kern = set
			defer func() { kern = saved }()
			for _, typ := range []kv.Type{kv.Q4, kv.Q8, kv.F16} {
				for _, residual := range []int{0, 64} {
					t.Run(fmt.Sprintf("%v residual %d", typ, residual), func(t *testing.T) { checkSoftcapDecode(t, typ, residual) })
				}
			}
			t.Run("prefill", checkSoftcapPrefill)
		})
	}
}

func checkSoftcapDecode(t *testing.T, typ kv.Type, residual int) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 1, Softcap: 20}
	const n = 300
	r := rand.New(rand.NewPCG(11, uint64(typ)))
	k, v := randomKV(r, p, n, false)
	c := fillCache(t, kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: n, Smooth: typ != kv.F16, Residual: residual}, k, v, n)
	q := randomVec(r, p.Heads*p.HeadDim)
	for i := range q {
		q[i] *= 1.2 // scores of std about 10
	}
	out := make([]float32, len(q))
	ws := NewWorkspace(p, n, 1, 2, nil)
	if err := Decode(testPool(t, 2), ws, out, q, c, 0, n, p); err != nil {
		t.Fatal(err)
	}
	// What attention reads: codes, and from the residual window's start the
	// ring's f16 copies of the originals.
	sk, sv := storedKV(c, n)
	row := p.KVHeads * p.HeadDim
	for i := c.Layer(0).TailStart(0, n) * row; i < n*row; i++ {
		sk[i], sv[i] = half.Round(k[i]), half.Round(v[i])
	}
	if _, rel := headStats(out, decodeReference64(q, sk, sv, n, p), p.HeadDim); rel > maxStoredRel {
		t.Errorf("relative error %.3g against capped float64 attention on the stored values (max %g)", rel, maxStoredRel)
	}
	uncapped := p
	uncapped.Softcap = 0
	if _, rel := headStats(out, decodeReference64(q, sk, sv, n, uncapped), p.HeadDim); rel < 100*maxStoredRel {
		t.Errorf("the cap hardly changes the output (relative difference %.3g): the test would not see it skipped", rel)
	}
}

func checkSoftcapPrefill(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 1, Softcap: 20, Window: 40}
	const rows = 100
	r := rand.New(rand.NewPCG(12, 12))
	k, v := randomKV(r, p, rows, false)
	cache := newCache(t, p, kv.F16, 32, rows, k, v, 0)
	ws := NewWorkspace(p, rows, rows, 1, nil)
	q := randomVec(r, rows*p.Heads*p.HeadDim)
	for i := range q {
		q[i] *= 1.2
	}
	out := make([]float32, len(q))
	if err := Prefill(testPool(t, 1), ws, out, q, k, v, rows, cache, 0, 0, p); err != nil {
		t.Fatal(err)
	}
	// New rows are attended rounded through f16.
	for i := range k {
		k[i], v[i] = half.Round(k[i]), half.Round(v[i])
	}
	qw := p.Heads * p.HeadDim
	for i := 0; i < rows; i++ {
		if _, rel := headStats(out[i*qw:(i+1)*qw], decodeReference64(q[i*qw:(i+1)*qw], k, v, i+1, p), p.HeadDim); rel > maxStoredRel {
			t.Fatalf("row %d: relative error %.3g", i, rel)
		}
	}
}
