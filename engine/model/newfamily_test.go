package model_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/cpu"
	"nibble/engine/family"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/synth"
)

// A llama-like family is one table entry (its traits, quirks and tensor
// layout) and nothing else: synth writes it, the loader binds it and the
// forward pass runs it. "nibblet" has llama's traits and layout under its
// own architecture name; "nibbletneox" differs from it in one trait only.
func init() {
	family.Register(family.Family{
		Name:    "nibblet",
		Tensors: family.Layout{RopeFactors: family.RopeFreqs},
		Chat:    family.Chat{Template: "chatml"},
		Synth:   family.Synth{RopeBase: 500000, RMSEps: 1e-5},
	})
	family.Register(family.Family{
		Name:    "nibbletneox",
		Traits:  family.Traits{RopeNeox: true},
		Tensors: family.Layout{RopeFactors: family.RopeFreqs},
		Chat:    family.Chat{Template: "chatml"},
		Synth:   family.Synth{RopeBase: 500000, RMSEps: 1e-5},
	})
}

// runSynth writes a small model of arch with fixed sizes and seed (the same
// tensor names give the same weights in every family), loads it through
// model.Open and returns the logits of a prefill and of three greedy decode
// steps.
func runSynth(t *testing.T, arch string) [][]float32 {
	t.Helper()
	o := synth.DefaultOptions(arch)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 256
	o.Type, o.Seed, o.VocabData = ggml.Q8_0, 11, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatalf("synth %s: %v", arch, err)
	}
	b := cpu.New(1)
	t.Cleanup(func() { b.Close() })
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatalf("open %s: %v", arch, err)
	}
	t.Cleanup(func() { m.Close() })
	if m.HP.Arch != arch {
		t.Fatalf("loaded arch %q, want %q", m.HP.Arch, arch)
	}
	s, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 64}, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var steps [][]float32
	tokens := []int32{1, 450, 7483, 310, 3444, 338, 263, 4272}
	pos := 0
	for step := range 4 {
		logits := make([]float32, m.HP.Vocab)
		if err := s.Forward(tokens, pos, logits); err != nil {
			t.Fatalf("%s step %d: %v", arch, step, err)
		}
		for i, x := range logits {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s step %d: logit %d is %g", arch, step, i, x)
			}
		}
		if slices.Min(logits) == slices.Max(logits) {
			t.Fatalf("%s step %d: every logit is %g", arch, step, logits[0])
		}
		steps = append(steps, logits)
		pos += len(tokens)
		tokens = []int32{int32(argmax(logits))}
	}
	return steps
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// The test-only family with llama's traits gives llama's logits bit for bit
// on the same weights; the one with NeoX RoPE does not, so the traits come
// from the table entry and not from a default.
func TestRegisteredFamilyRunsLikeLlama(t *testing.T) {
	llama := runSynth(t, "llama")
	nibblet := runSynth(t, "nibblet")
	neox := runSynth(t, "nibbletneox")
	for step := range llama {
		if !slices.Equal(nibblet[step], llama[step]) {
			t.Errorf("step %d: nibblet's logits differ from llama's on the same weights", step)
		}
	}
	if slices.Equal(neox[0], llama[0]) {
		t.Error("prefill: NeoX RoPE gave llama's logits; the family's traits were not applied")
	}
}
