//go:build linux

package metal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/numeric"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// hfFamilyModels are the tiny random-weight models that transformers made
// for the mixture-of-experts and Gemma 4 families (engine/testdata/hf,
// whose README says what each exercises), with the window a second pass
// gives their sliding-window layers (0: the model has none, and the
// second pass is a q4 cache instead).
var hfFamilyModels = []struct {
	name   string
	window int
}{
	{"tiny-qwen3moe", 0},
	{"tiny-mixtral", 0},
	{"tiny-gptoss", 16},
	{"tiny-gemma4", 16},
	{"tiny-gemma4-moe", 16},
}

// The acceptance test of the Metal backend for the families of
// mixture-of-experts and Gemma 4: each tiny model of engine/testdata/hf
// runs the whole pass (two prefill batches, 8 greedy decode steps) on the
// emulator and on the CPU backend with float activations (exactCPU, its
// expert matmuls too). With an f16 cache the last prompt position's logits
// agree with cosine ≥ 0.99999 and the greedy tokens are the same; a second
// pass takes the sliding-window layers down to a window of 16 (the prompt's
// batches wrap their rings) or, for a model without them, a q4 cache
// (smoothed: cosine ≥ 0.999, as TestForwardMatchesCPU) where the head dim
// takes groups of 32. A model the CPU backend does not load is skipped
// (the engine's own test reports it).
func TestHFFamiliesMatchCPU(t *testing.T) {
	dir := filepath.Join("..", "engine", "testdata", "hf")
	emulatorDevice(t)
	for _, hm := range hfFamilyModels {
		t.Run(hm.name, func(t *testing.T) {
			path := filepath.Join(dir, hm.name+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("skipping: %v", err)
			}
			familyPassesMatchCPU(t, path, hm.window)
		})
	}
}

// synthVocab is the tokenizer the synth models of these tests copy.
func synthVocab(t *testing.T) string {
	t.Helper()
	vocab := filepath.Join(testdata.Dir(t), "tokenizer", "ggml-vocab-phi-3.gguf")
	if _, err := os.Stat(vocab); err != nil {
		t.Skipf("skipping: %v", err)
	}
	return vocab
}

// The same passes for a gpt-oss that nibble synth writes (random weights,
// MXFP4 experts with biases and the clamped SwiGLU, sinks, YaRN, window 128
// on even layers: the second pass takes it to 16). Synth Qwen3-MoE and
// Mixtral run in TestMoEFamiliesMatchCPU (its exactCPU.MatMulID is this
// test's reference too).
func TestSynthGptOSSMatchesCPU(t *testing.T) {
	vocab := synthVocab(t)
	emulatorDevice(t)
	o := synth.DefaultOptions("gptoss")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 256
	o.Experts, o.ExpertsUsed, o.ExpertFF = 8, 2, 64
	o.Type, o.Seed, o.VocabFrom = ggml.Q8_0, 231, vocab
	path := filepath.Join(t.TempDir(), "gptoss.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	familyPassesMatchCPU(t, path, 16)
}

// Gemma 4 written by nibble synth, in two shapes: an E model's (every
// other layer global with wider heads and fewer kv heads, the last layer
// reading an earlier layer's cache, per-layer inputs, v taken from k on
// global layers) and the real models' head dims, 256 on sliding layers and
// 512 on global ones (the attention kernels' two-words-a-lane path). The
// synth window is 16 already, shorter than the prompt: the second pass is
// a q4 cache.
func TestSynthGemma4MatchesCPU(t *testing.T) {
	vocab := synthVocab(t)
	emulatorDevice(t)
	for _, c := range []struct {
		name           string
		heads, kvh, hd int
		g4             synth.Gemma4Options
	}{
		{"e-model", 4, 2, 32, synth.Gemma4Options{GlobalEvery: 2, HeadDimGlobal: 64, KVHeadsGlobal: 1, SharedKVLayers: 1, PerLayerEmbd: 32, GlobalVFromK: true}},
		{"heads-256-512", 2, 1, 256, synth.Gemma4Options{GlobalEvery: 2, HeadDimGlobal: 512, SharedKVLayers: 1, PerLayerEmbd: 32}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := synth.DefaultOptions("gemma4")
			o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.HeadDim = 5, 128, c.heads, c.kvh, 256, c.hd
			o.Gemma4, o.Window, o.Type, o.Seed, o.VocabFrom = c.g4, 16, ggml.Q8_0, 232, vocab
			path := filepath.Join(t.TempDir(), "gemma4.gguf")
			if err := synth.Generate(path, o); err != nil {
				t.Fatal(err)
			}
			familyPassesMatchCPU(t, path, 0)
		})
	}
}

// familyPassesMatchCPU runs the model at path on the emulator and on the
// exact CPU reference: an f16 cache with the model's window, then an f16
// cache with every sliding-window layer's window set to window (> 0), or a
// q4 cache (window 0).
func familyPassesMatchCPU(t *testing.T, path string, window int) {
	t.Helper()
	// A family the engine does not run yet is not Metal's failure: the
	// CPU must load the file first.
	cb := cpu.New(1)
	if m, err := model.Open(path, cb); err != nil {
		cb.Close()
		t.Skipf("skipping: the CPU backend does not load it yet: %v", err)
	} else {
		m.Close()
		cb.Close()
	}
	exact, _ := load(t, path, newExactCPU(), false)
	metal, em := load(t, path, newBackend(t), true)
	ids := em.EncodePrompt(forwardPrompt)
	if len(ids) <= forwardBatch {
		t.Fatalf("the prompt is %d tokens, not two batches of %d", len(ids), forwardBatch)
	}
	hp := exact.m.HP
	t.Logf("%s: %d layers, embd %d, %d heads, %d kv heads, head dim %d, window %d, %d experts (%d used), %d prompt tokens",
		hp.Arch, hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.HeadDim, hp.Window, hp.Experts, hp.ExpertsUsed, len(ids))
	type passCase struct {
		window int
		kv     kv.Config
		minCos float64
	}
	cases := []passCase{{hp.Window, kv.Config{Type: kv.F16}, 0.99999}}
	switch {
	case window > 0:
		cases = append(cases, passCase{window, kv.Config{Type: kv.F16}, 0.99999})
	case hp.MaxHeadDim()%32 == 0:
		cases = append(cases, passCase{hp.Window, kv.Config{Type: kv.Q4, GroupSize: 32, Smooth: true}, 0.999})
	default:
		t.Logf("no q4 pass: head dim %d is not a multiple of the group size 32", hp.HeadDim)
	}
	for _, c := range cases {
		what := fmt.Sprintf("%v window %d", c.kv.Type, c.window)
		exact.m.HP.Window, metal.m.HP.Window = c.window, c.window
		t.Run(what, func(t *testing.T) {
			want := runPass(t, exact.m, ids, c.kv)
			got := runPass(t, metal.m, ids, c.kv)
			cos := numeric.Cosine(got.last, want.last)
			worstStep := 1.0
			for i := 0; i < greedySteps && got.greedy[i] == want.greedy[i]; i++ {
				worstStep = min(worstStep, numeric.Cosine(got.steps[i], want.steps[i]))
			}
			t.Logf("1 - cos(last prompt logits) metal/cpu-float %.2g (decode steps ≤ %.2g); greedy metal %v, cpu-float %v; ring layers metal %d, cpu %d",
				1-cos, 1-worstStep, got.greedy, want.greedy, got.rings, want.rings)
			if got.rings != want.rings {
				t.Errorf("ring layers: metal %d, cpu %d", got.rings, want.rings)
			}
			if !(cos >= c.minCos) {
				t.Errorf("cosine of the last-position logits to the CPU with float activations %.7f < %g", cos, c.minCos)
			}
			logParting(t, "the reference's", want, got)
			if !slices.Equal(got.greedy, want.greedy) {
				t.Errorf("greedy tokens differ: metal %v, cpu with float activations %v", got.greedy, want.greedy)
			}
		})
	}
}
