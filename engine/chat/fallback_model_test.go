package chat

import (
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/gguf"
	"nibble/engine/tokenizer"
	"nibble/internal/testdata"
)

// Special tokens of real vocabularies (Llama 3, Qwen2, Gemma, Phi-3, Mistral v0.3, Llama 2).
var (
	vocabLlama3  = []string{"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
	vocabQwen2   = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	vocabGemma   = []string{"<bos>", "<start_of_turn>", "<end_of_turn>"}
	vocabPhi3    = []string{"<s>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>", "<|endoftext|>"}
	vocabMistral = []string{"<s>", "</s>", "[INST]", "[/INST]"}
	vocabLlama2  = []string{"<s>", "</s>"}
)

func vocabOf(tokens ...string) func(string) bool {
	set := map[string]bool{}
	for _, s := range tokens {
		set[s] = true
	}
	return func(s string) bool { return set[s] }
}

// brokenTemplate fails to parse (an unterminated block), as a truncated or hand-edited
// tokenizer.chat_template would.
const brokenTemplate = "{% for m in messages %}{{ m.content }}"

// A GGUF whose template does not parse still gets the format its vocabulary says it was trained
// on, and the caller learns what was wrong with the GGUF's template.
func TestForModelOrFallbackBrokenTemplate(t *testing.T) {
	cases := []struct {
		arch  string
		vocab []string
		want  string
	}{
		{"llama", vocabLlama3, "llama3"}, // not llama2's [INST]
		{"llama", []string{"<|eot_id|>"}, "llama3"},
		{"qwen2", vocabQwen2, "chatml"},
		{"llama", vocabQwen2, "chatml"}, // a ChatML fine-tune of a Llama base
		{"gemma2", vocabGemma, "gemma"},
		{"llama", vocabGemma, "gemma"},
		{"llama", vocabPhi3, "phi3"}, // Phi-3-mini's GGUF says arch phi3, but fine-tunes vary
		{"llama", []string{"<|user|>", "<|end|>"}, "phi3"},
		{"llama", vocabMistral, "mistral"},
		{"llama", vocabLlama2, "llama2"},
		{"falcon", nil, "chatml"},
	}
	for _, c := range cases {
		tpl, problem := ForModelOrFallback(brokenTemplate, c.arch, vocabOf(c.vocab...))
		if tpl == nil {
			t.Errorf("%s %q: no template", c.arch, c.vocab)
			continue
		}
		if tpl.Name() != c.want {
			t.Errorf("%s %q: got %s, want %s", c.arch, c.vocab, tpl.Name(), c.want)
		}
		if problem == nil || !strings.Contains(problem.Error(), "parse") || !strings.Contains(problem.Error(), c.want) {
			t.Errorf("%s %q: problem %v, want the parse error and the fallback used", c.arch, c.vocab, problem)
		}
		if _, err := tpl.Render(goldenConversations["system"], goldenVars); err != nil {
			t.Errorf("%s %q: fallback %s does not render: %v", c.arch, c.vocab, tpl.Name(), err)
		}
	}
	// The problem is short enough to show: not the whole template, as gonja's error quotes it.
	long := strings.Repeat("{{ messages[0].content }}\n", 200) + brokenTemplate
	if _, problem := ForModelOrFallback(long, "llama", nil); problem == nil || len(problem.Error()) > 300 || !strings.Contains(problem.Error(), "endfor") {
		t.Errorf("long template: problem %q", problem)
	}
	// nil hasToken: the architecture alone decides.
	if tpl, problem := ForModelOrFallback(brokenTemplate, "qwen2", nil); tpl == nil || tpl.Name() != "chatml" || problem == nil {
		t.Errorf("nil vocabulary: %v, %v", tpl, problem)
	}
}

func TestForModelOrFallbackGoodOrMissing(t *testing.T) {
	tpl, problem := ForModelOrFallback("{{ messages[0].content }}!", "llama", vocabOf(vocabLlama3...))
	if tpl == nil || tpl.Name() != "gguf" || problem != nil {
		t.Fatalf("parsing template: %v, %v", tpl, problem)
	}
	// No template at all is common (older conversions) and nothing is wrong with it: the name
	// says which fallback is used.
	tpl, problem = ForModelOrFallback("", "llama", vocabOf(vocabLlama3...))
	if tpl == nil || tpl.Name() != "llama3" || problem != nil {
		t.Fatalf("missing template: %v, %v", tpl, problem)
	}
}

// The hint tokens are really single tokens of the shipped vocabularies.
func TestForModelOrFallbackRealVocabularies(t *testing.T) {
	dir := filepath.Join(testdata.Dir(t), "tokenizer")
	for file, want := range map[string]string{
		"ggml-vocab-llama-bpe.gguf": "llama3",
		"ggml-vocab-phi-3.gguf":     "phi3",
		"ggml-vocab-llama-spm.gguf": "llama2",
	} {
		f, err := gguf.Open(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		tpl, problem := ForModelOrFallback(brokenTemplate, "llama", func(s string) bool { _, ok := tok.TokenID(s); return ok })
		f.Close()
		if tpl == nil || tpl.Name() != want || problem == nil {
			t.Errorf("%s: got %v, %v; want %s and a problem", file, tpl, problem, want)
		}
	}
}
