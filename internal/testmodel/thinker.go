package testmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// ThinkerPieces is what the Thinker model replies to any chat, token by token: a think block
// as Qwen3 writes it, then the answer.
var ThinkerPieces = []string{
	"<think>", "\nThe user", " says hello,", " so I will", " greet them", " back warmly",
	" and offer", " to help.", "\n</think>", "\n\n", "Hello", "! How can", " I help", " you today?",
}

// The Thinker's reply split as it should be: its reasoning and its answer.
const (
	ThinkerReasoning = "The user says hello, so I will greet them back warmly and offer to help."
	ThinkerAnswer    = "Hello! How can I help you today?"
)

// Qwen3Template is the path of Qwen3's own chat template (from Qwen3-0.6B's tokenizer config).
func Qwen3Template(t testing.TB) string {
	t.Helper()
	return filepath.Join(testdata.RepoRoot(t), "engine", "reasoning", "testdata", "Qwen-Qwen3-0.6B.jinja")
}

// Thinker writes a small model with Qwen3's chat template that replies ThinkerPieces to every
// chat (synth.GenerateScripted): the real engine, template and tokenizer, a known reasoning
// reply. It returns the file's path in dir.
func Thinker(t testing.TB, dir, name string) string {
	t.Helper()
	tpl, err := os.ReadFile(Qwen3Template(t))
	if err != nil {
		t.Fatal(err)
	}
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Ctx = 1, 64, 2, 1, 64, 4096
	o.Type, o.VocabData, o.Seed = ggml.F16, vocab.LlamaSPM, 21
	path := filepath.Join(dir, name)
	// Every chat prompt Qwen3's template renders ends in a newline, llama's SPM byte token.
	sc := synth.Script{Trigger: "<0x0A>", Pieces: ThinkerPieces, ChatTemplate: string(tpl)}
	if err := synth.GenerateScripted(path, o, sc); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ThinkerPieces, ""); !strings.Contains(got, ThinkerReasoning) || !strings.HasSuffix(got, ThinkerAnswer) {
		t.Fatalf("ThinkerPieces %q do not hold the reasoning and answer", got)
	}
	return path
}
