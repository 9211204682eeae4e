package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ4AccVFusedIdentical checks that the fused q4 V kernel (codes read
// directly, 4 heads per pass) gives bit-identical accumulators to the
// unpack-then-accumulate path it replaces.
func TestQ4AccVFusedIdentical(t *testing.T) {
	if !kern.q4Permuted {
		t.Skip("no AVX2: the fused kernel is not used")
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, d := range []int{32, 64, 128, 256} {
		for _, gs := range []int{32, 64} {
			for _, g := range []int{4, 8} {
				for _, nb := range []int{1, 7, 32} {
					if d%gs != 0 || metaLanes(d, gs) > maxSIMDLanes {
						continue
					}
					name := fmt.Sprintf("d%d gs%d g%d nb%d", d, gs, g, nb)
					p := Params{Heads: g, KVHeads: 1, HeadDim: d, Scale: 1}
					ws := NewWorkspace(p, blockTokens, 0, 1, nil)
					st := &ws.slots[0]
					codes := make([]uint32, nb*d/8)
					for i := range codes {
						codes[i] = r.Uint32()
					}
					for i := range st.sc {
						st.sc[i] = r.Float32()
					}
					for i := range st.metaV {
						st.metaV[i] = float32(r.NormFloat64())
					}
					o0 := randomVec(r, g*d)
					codeWSIMD(st, gs, nb)
					want := append([]float32(nil), o0...)
					q4UnpackAVX2(&st.vbuf[0], &codes[0], nb*d/32)
					codeAccVAVX2(&want[0], &st.vbuf[0], &st.wbuf[0], g, d, gsLog(gs), st.ms, nb)
					got := append([]float32(nil), o0...)
					q4AccV4AVX2(&got[0], &codes[0], &st.wbuf[0], g/4, d, gsLog(gs), st.ms, nb)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: element %d: fused %v, unpacked %v", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
