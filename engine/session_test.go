package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/chat"
	"nibble/engine/cpu"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

func TestStopMatcherHoldsBackPartialStops(t *testing.T) {
	m := newStopMatcher([]string{"</s>", "User:"})
	var out strings.Builder
	for _, p := range []string{"Hello <", "/", "x> wor", "ld U", "ser", ":", " more"} {
		out.WriteString(m.push(p))
	}
	if got := out.String(); got != "Hello </x> world " || !m.hit {
		t.Fatalf("got %q (hit %v), want text before the stop string and a hit", got, m.hit)
	}
	m = newStopMatcher([]string{"ab"})
	if got := m.push("xa") + m.flush(); got != "xa" {
		t.Fatalf("flush lost held-back text: %q", got)
	}
}

// openTiny loads a test model on a CPU backend of threads workers
// (m.Backend).
func openTiny(t *testing.T, name string, threads int) *Model {
	t.Helper()
	td := testdata.Dir(t)
	b := cpu.New(threads)
	m, err := LoadModel(filepath.Join(td, "models", name), b)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return m
}

// A second question about the same document prefills only the question's
// tokens, and answers exactly as a fresh session would.
func TestPrefixReuseAcrossQuestions(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	td := testdata.Dir(t)
	text, err := os.ReadFile(filepath.Join(td, "long_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	doc := m.EncodePrompt(strings.Repeat(string(text), 3))[:2000]
	q1 := m.Tok.Encode("\nQuestion: what is the first number in the text?\nAnswer:", false, false)
	q2 := m.Tok.Encode("\nQuestion: who wrote it?\nAnswer:", false, false)
	b := m.Backend
	s, err := NewSession(m, b, Options{Ctx: 2200, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	gp := GenParams{MaxTokens: 8, Sample: sample.Params{Temperature: 0}, IgnoreEOS: true}
	st1, err := s.Generate(context.Background(), slices.Concat(doc, q1), gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st1.PrefillTokens != len(doc)+len(q1) || st1.ReusedTokens != 0 {
		t.Fatalf("first question: prefilled %d reused %d, want %d and 0", st1.PrefillTokens, st1.ReusedTokens, len(doc)+len(q1))
	}
	st2, err := s.Generate(context.Background(), slices.Concat(doc, q2), gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The questions share their first tokens ("\nQuestion:"), which are reused too.
	shared := 0
	for shared < len(q1) && shared < len(q2) && q1[shared] == q2[shared] {
		shared++
	}
	if st2.PrefillTokens != len(q2)-shared || st2.ReusedTokens != len(doc)+shared {
		t.Fatalf("second question: prefilled %d reused %d, want %d and %d", st2.PrefillTokens, st2.ReusedTokens, len(q2)-shared, len(doc)+shared)
	}
	fresh, err := NewSession(m, b, Options{Ctx: 2200, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	st3, err := fresh.Generate(context.Background(), slices.Concat(doc, q2), gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st2.Tokens, st3.Tokens) {
		t.Fatalf("reused cache answered %v, a fresh session %v", st2.Tokens, st3.Tokens)
	}
	t.Logf("document %d tokens; second question prefilled %d tokens, reused %d", len(doc), st2.PrefillTokens, st2.ReusedTokens)
}

func TestContextBudgetIsAClearError(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	b := m.Backend
	s, err := NewSession(m, b, Options{Ctx: 64, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.EncodePrompt(strings.Repeat("four bits of cache ", 20))
	_, err = s.Generate(context.Background(), prompt, GenParams{MaxTokens: 8, Sample: sample.Params{}}, nil)
	if !errors.Is(err, ErrContextFull) {
		t.Fatalf("got %v, want ErrContextFull", err)
	}
	// Asked for it, the session keeps the first tokens and the recent window.
	st, err := s.Generate(context.Background(), prompt, GenParams{MaxTokens: 8, KeepOnOverflow: 4, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.GenTokens != 8 || len(s.Tokens()) > 64 || !slices.Equal(s.Tokens()[:4], prompt[:4]) {
		t.Fatalf("overflow policy: generated %d, cache holds %d tokens starting %v", st.GenTokens, len(s.Tokens()), s.Tokens()[:4])
	}
}

func TestGenerateCancels(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 1)
	b := m.Backend
	s, err := NewSession(m, b, Options{Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	st, err := s.Generate(ctx, m.EncodePrompt("Once"), GenParams{MaxTokens: 100, IgnoreEOS: true}, func(Event) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || st.StopReason != "cancelled" || st.GenTokens > 4 {
		t.Fatalf("got err %v, reason %q after %d tokens", err, st.StopReason, st.GenTokens)
	}
}

// RepeatLastN = -1 penalizes the whole context, not nothing.
func TestRepeatWindowMinusOneIsWholeContext(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	b := m.Backend
	s, err := NewSession(m, b, Options{Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := m.EncodePrompt("the the the the the")
	sp := sample.Params{Temperature: 0, RepeatPenalty: 1e6, RepeatLastN: -1}
	st, err := s.Generate(context.Background(), prompt, GenParams{MaxTokens: 48, Sample: sp, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for _, tok := range prompt {
		seen[tok] = true
	}
	for i, tok := range st.Tokens {
		if seen[tok] {
			t.Fatalf("token %d (%d) repeats an earlier token despite a whole-context penalty: %v", i, tok, st.Tokens)
		}
		seen[tok] = true
	}
}

// A Llama-3 GGUF whose chat template does not parse gets the Llama-3
// format chosen from its vocabulary (not Llama 2's [INST]), and the model
// says what was wrong.
func TestBrokenTemplateFallsBackByVocabulary(t *testing.T) {
	f, err := gguf.Open(filepath.Join(testdata.Dir(t), "models", "tiny-llama3-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys {
		if k != "tokenizer.chat_template" {
			w.SetValue(k, f.KV[k])
		}
	}
	if err := w.Set("tokenizer.chat_template", "{% for m in messages %}{{ m.content }"); err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		src := f.TensorData(ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, func(dst []byte) error { copy(dst, src); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "broken-template.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b := cpu.New(1)
	defer b.Close()
	m, err := LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Template.Name() != "llama3" || m.TemplateProblem == nil {
		t.Fatalf("template %q, problem %v; want llama3 and a reported problem", m.Template.Name(), m.TemplateProblem)
	}
	ids, err := m.EncodeChat([]chat.Message{{Role: "user", Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if eot, _ := m.Tok.TokenID("<|start_header_id|>"); !slices.Contains(ids, eot) {
		t.Fatalf("rendered prompt has no <|start_header_id|>: %v", ids)
	}
}
