package model

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/internal/testdata"
)

// lambdaRecorder keeps the last λ each cache received per layer.
type lambdaRecorder struct {
	backend.Backend
	got map[backend.KVCache]map[int][]float32
}

func (r *lambdaRecorder) KVSetSmoothing(c backend.KVCache, layer int, lambda []float32) {
	if r.got[c] == nil {
		r.got[c] = map[int][]float32{}
	}
	r.got[c][layer] = slices.Clone(lambda)
	r.Backend.KVSetSmoothing(c, layer, lambda)
}

// The K channel smoothing of a quantized cache is a per-model constant: two
// sequences with different prompts store K with the same λ, so a token's
// codes do not depend on the prompt it came in (a reused prefix holds
// exactly what a cold run would write).
func TestSmoothingIsAPerModelConstant(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the trained test model is absent (%v): random weights have no outlier channels to smooth", err)
	}
	rec := &lambdaRecorder{Backend: cpu.New(2), got: map[backend.KVCache]map[int][]float32{}}
	t.Cleanup(func() { rec.Backend.Close() })
	m, err := Open(path, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	prompt := func(seed int32) []int32 {
		p := make([]int32, 48)
		for i := range p {
			p[i] = 3 + (seed*7919+int32(i)*104729)%31000
		}
		return p
	}
	logits := make([]float32, m.HP.Vocab)
	for _, typ := range []kv.Type{kv.Q4, kv.Q8} {
		var first map[int][]float32
		for seq, p := range [][]int32{prompt(1), prompt(2), prompt(3)[:1]} {
			st, err := m.NewState(kv.Config{Type: typ, GroupSize: 32, Ctx: 128, Smooth: true}, 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Forward(p, 0, logits); err != nil {
				t.Fatal(err)
			}
			got := rec.got[st.Cache]
			if seq == 0 {
				first = got
				if !slices.ContainsFunc(slices.Collect(maps.Values(got)), func(l []float32) bool { return l != nil }) {
					t.Fatalf("%v: no layer smoothed: the test cannot tell λs apart", typ)
				}
			}
			for layer := range m.HP.Layers {
				if !slices.Equal(got[layer], first[layer]) {
					t.Errorf("%v: sequence %d (%d tokens) stored layer %d with another λ than sequence 0", typ, seq, len(p), layer)
				}
			}
			st.Close()
		}
	}
}
