package attention

import (
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
)

// BenchmarkBlockKernels times each block kernel on cache-resident data
// (D 128, G 4, 32 tokens): the compute side of the decode step.
func BenchmarkBlockKernels(b *testing.B) {
	p := Params{Heads: 4, KVHeads: 1, HeadDim: 128, Scale: 0.0884}
	r := rand.New(rand.NewPCG(1, 1))
	k, v := randomKV(r, p, 32, false)
	ws := NewWorkspace(p, 32, 0, 1, nil)
	st := &ws.slots[0]
	st.prepareQuery(randomVec(r, 4*128), p.Scale, 32, kern.q4Permuted, &kv.LayerView{HeadDim: 128}, 0)
	resetAccumulators(st.o, st.ml)
	for _, t := range kv.Types {
		c := newCache(b, p, t, 32, 32, k, v, 32)
		lv := c.Layer(0)
		switch t {
		case kv.Q4:
			kern.meta(st.metaK, lv.K.Meta[:32*8], 32, 8, st.ms)
			kern.meta(st.metaV, lv.V.Meta[:32*8], 32, 8, st.ms)
			b.Run("q4scores", func(b *testing.B) {
				for b.Loop() {
					kern.q4Scores(st, lv.K.Q4[:32*16], 32, 32)
				}
			})
			b.Run("q4accv", func(b *testing.B) {
				for b.Loop() {
					kern.q4AccV(st, lv.V.Q4[:32*16], 32, 32)
				}
			})
			b.Run("meta", func(b *testing.B) {
				for b.Loop() {
					kern.meta(st.metaK, lv.K.Meta[:32*8], 32, 8, st.ms)
				}
			})
		case kv.F16:
			b.Run("f16scores", func(b *testing.B) {
				for b.Loop() {
					kern.f16Scores(st, lv.K.F16[:32*128], 32)
				}
			})
			b.Run("f16accv", func(b *testing.B) {
				for b.Loop() {
					kern.f16AccV(st, lv.V.F16[:32*128], 32)
				}
			})
		}
	}
	scores := make([]float32, len(st.sc))
	for i := range scores {
		scores[i] = float32(i%7) * 0.1
	}
	b.Run("softmax", func(b *testing.B) {
		for b.Loop() {
			copy(st.sc, scores)
			st.ml[0], st.ml[2], st.ml[4], st.ml[6] = 1, 1, 1, 1
			kern.softmax(st.sc, st.ml, st.o, st.g, st.d, 32)
		}
	})
}
