//go:build linux

package metal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

func TestSynthGemma4MatchesCPU(t *testing.T) {
	vocab := filepath.Join(testdata.Dir(t), "tokenizer", "ggml-vocab-phi-3.gguf")
	if _, err := os.Stat(vocab); err != nil {
		t.Skipf("skipping: %v", err)
	}
	emulatorDevice(t)
	o := synth.DefaultOptions("gemma4")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.HeadDim = 5, 128, 2, 1, 256, 256
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: 2, HeadDimGlobal: 512, SharedKVLayers: 1, PerLayerEmbd: 32, GlobalVFromK: true}
	o.Window, o.Type, o.Seed, o.VocabFrom = 16, ggml.Q8_0, 232, vocab
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	exact, _ := load(t, path, newExactCPU(), false)
	metal, em := load(t, path, newBackend(t), true)
	ids := em.EncodePrompt(forwardPrompt)
	for _, c := range []kv.Config{{Type: kv.F16}, {Type: kv.Q4, GroupSize: 32, Smooth: true, Rotate: true, Residual: 8}} {
		t.Run(fmt.Sprint(c.Type), func(t *testing.T) {
			want := runPass(t, exact.m, ids, c)
			got := runPass(t, metal.m, ids, c)
			cos := numeric.Cosine(got.last, want.last)
			t.Logf("1 - cos %.2g; greedy metal %v, cpu-float %v; rings %d %d", 1-cos, got.greedy, want.greedy, got.rings, want.rings)
			if !(cos >= 0.99999) || !slices.Equal(got.greedy, want.greedy) {
				t.Errorf("differ")
			}
		})
	}
}
