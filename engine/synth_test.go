package engine

import (
	"context"
	"path/filepath"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/sample"
	"nibble/engine/synth"
)

// A model written by nibble synth passes the loader's llama.cpp-style checks
// (names, shapes, types) and generates, for every family.
func TestSynthModelsLoadAndGenerate(t *testing.T) {
	for _, arch := range synth.Archs {
		t.Run(arch, func(t *testing.T) {
			o := synth.DefaultOptions(arch)
			o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 256
			if arch != "phi3" {
				o.Window = 8 // shorter than the prompt and generation
			}
			o.Type, o.Seed, o.VocabData = ggml.Q4_0, 5, vocab.LlamaSPM
			path := filepath.Join(t.TempDir(), arch+".gguf")
			if err := synth.Generate(path, o); err != nil {
				t.Fatal(err)
			}
			b := cpu.New(2)
			defer b.Close()
			m, err := LoadModel(path, b)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.HP.Arch != arch || m.HP.TiedOutput != o.TiedOutput || m.HP.QKVBias != (arch == "qwen2" || arch == "gpt-oss") ||
				m.HP.QKNorm != (arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3" || arch == "gemma4") || m.HP.AttnSoftcap != map[bool]float32{true: 50}[arch == "gemma2"] || m.HP.Window != o.Window {
				t.Fatalf("hparams %+v", m.HP)
			}
			s, err := NewSession(m, b, Options{Ctx: 128})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.Generate(context.Background(), m.EncodePrompt("Nibble"), GenParams{MaxTokens: 12, Sample: sample.Params{Temperature: 0.8, Seed: 1}, IgnoreEOS: true}, nil)
			if err != nil || st.GenTokens != 12 {
				t.Fatalf("generated %d tokens: %v", st.GenTokens, err)
			}
		})
	}
}
