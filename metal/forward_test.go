//go:build linux

package metal

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

// forwardPrompt is long enough for two prefill batches of forwardBatch, the
// first of which calibrates the q4 cache's channel smoothing (16 rows or
// more), and the second attends over a cached prefix.
const (
	forwardPrompt = "Nibble keeps its KV cache in four bits because memory, not arithmetic, " +
		"bounds decoding on a laptop: every generated token reads the whole cache once, " +
		"so halving it twice makes long contexts fit and run faster."
	forwardBatch = 24
	greedySteps  = 8
)

// testModels lists the GGUF files of ../shared/testdata/models, skipping t
// when they are absent.
func testModels(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata.Dir(t), "models", "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("skipping: no models in the shared test data")
	}
	return files
}

// passResult is what one backend computed for the prompt: the last
// position's logits after prefill and the greedy tokens after it, with each
// decode step's logits.
type passResult struct {
	last   []float32
	greedy []int32
	steps  [][]float32
}

// runPass prefills the prompt in batches of forwardBatch on m's backend,
// then decodes greedySteps tokens greedily.
func runPass(t *testing.T, m *engine.Model, ids []int32, kvc kv.Config) passResult {
	t.Helper()
	kvc.Ctx = len(ids) + greedySteps + 1
	st, err := m.NewState(kvc, forwardBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logits := make([]float32, m.HP.Vocab)
	for pos := 0; pos < len(ids); pos += forwardBatch {
		end := min(len(ids), pos+forwardBatch)
		if err := st.Forward(ids[pos:end], pos, logits); err != nil {
			t.Fatalf("%s: prefill at %d: %v", m.Backend.Name(), pos, err)
		}
	}
	r := passResult{last: slices.Clone(logits)}
	for i := 0; i < greedySteps; i++ {
		tok := sample.Greedy(logits)
		r.greedy = append(r.greedy, tok)
		if err := st.Forward([]int32{tok}, len(ids)+i, logits); err != nil {
			t.Fatalf("%s: decode step %d: %v", m.Backend.Name(), i, err)
		}
		r.steps = append(r.steps, slices.Clone(logits))
	}
	return r
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// The acceptance test of the Metal backend: the whole forward pass of every
// test model, loaded through the engine's own path, on the emulator against
// the CPU backend. The last prompt position's logits agree with cosine
// ≥ 0.9999 with an f16 cache and ≥ 0.999 with a q4 cache (smoothed, as
// sessions run it), and greedy decoding picks the same 8 tokens.
func TestForwardMatchesCPU(t *testing.T) {
	files := testModels(t)
	dev := emulatorDevice(t)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			cb := cpu.New(2)
			defer cb.Close()
			cm, err := engine.LoadModel(path, cb)
			if err != nil {
				t.Fatal(err)
			}
			defer cm.Close()
			mb, err := New(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			mm, err := engine.LoadModel(path, mb)
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Close()
			ids := cm.EncodePrompt(forwardPrompt)
			if len(ids) <= forwardBatch {
				t.Fatalf("the prompt is %d tokens, not two batches of %d", len(ids), forwardBatch)
			}
			for _, c := range []struct {
				kv     kv.Config
				minCos float64
			}{
				{kv.Config{Type: kv.F16}, 0.9999},
				{kv.Config{Type: kv.Q4, GroupSize: 32, Smooth: true}, 0.999},
			} {
				t.Run(c.kv.Type.String(), func(t *testing.T) {
					want := runPass(t, cm, ids, c.kv)
					got := runPass(t, mm, ids, c.kv)
					cos := cosine(got.last, want.last)
					worstStep := 1.0
					n := min(len(got.steps), len(want.steps))
					for i := 0; i < n && got.greedy[i] == want.greedy[i]; i++ {
						worstStep = min(worstStep, cosine(got.steps[i], want.steps[i]))
					}
					t.Logf("%d prompt tokens, kv %v: cos(last prompt logits) = %.7f; greedy metal %v, cpu %v; worst decode-step cos %.7f",
						len(ids), c.kv.Type, cos, got.greedy, want.greedy, worstStep)
					if !(cos >= c.minCos) {
						t.Errorf("cosine of the last-position logits %.7f < %g", cos, c.minCos)
					}
					if !slices.Equal(got.greedy, want.greedy) {
						t.Errorf("greedy tokens differ: metal %v, cpu %v", got.greedy, want.greedy)
					}
					if t.Failed() {
						t.Log("TestOpsInForward compares the pass op by op and names the kernel that differs")
					}
				})
			}
		})
	}
}
