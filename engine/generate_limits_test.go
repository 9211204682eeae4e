package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"nibble/engine/sample"
)

// prefilled begins a generation of prompt on a fresh session and runs its
// prefill, so the next Step samples from the prompt's logits.
func prefilled(t *testing.T, m *Model, ctx int, prompt string, p GenParams) (*Session, *Generation) {
	t.Helper()
	s, err := NewSession(m, m.Backend, Options{Ctx: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g, err := s.Begin(m.EncodePrompt(prompt), p)
	if err != nil {
		t.Fatal(err)
	}
	for g.next < len(g.prompt) {
		if _, err := g.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return s, g
}

// ignore_eos bans the end-of-generation tokens: even when EOS is by far the
// likeliest token, the sampler picks another and the text never holds it.
func TestIgnoreEOSNeverSamplesEndOfGeneration(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	eos := m.Tok.EOS()
	greedy := sample.Params{Temperature: 0}
	for _, ignore := range []bool{false, true} {
		s, g := prefilled(t, m, 128, "Answer:", GenParams{MaxTokens: 4, Sample: greedy, IgnoreEOS: ignore})
		s.logits[eos] = 1e6 // EOS first, by far
		ev, err := g.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ignore {
			if !g.Done() || g.Stats().StopReason != StopEndOfTurn {
				t.Fatalf("without ignore_eos: EOS should end the turn, got %+v", g.Stats())
			}
			continue
		}
		if ev.Token == eos || g.Done() {
			t.Fatalf("ignore_eos sampled EOS (token %d, done %v, text %q)", ev.Token, g.Done(), ev.Text)
		}
		for !g.Done() {
			if _, err := g.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		st := g.Stats()
		for _, tok := range st.Tokens {
			if m.Tok.IsEOG(tok) {
				t.Fatalf("ignore_eos generated end-of-generation token %d: %q", tok, st.Text)
			}
		}
		if strings.Contains(st.Text, "</s>") || st.GenTokens != 4 || st.StopReason != StopMaxTokens {
			t.Fatalf("ignore_eos: %d tokens, %s, text %q", st.GenTokens, st.StopReason, st.Text)
		}
	}
}

// A generation that runs to the context's end counts the prompt and the
// reply together as at most the context budget.
func TestContextEndCountsNoMoreThanTheBudget(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	const ctx = 48
	_, g := prefilled(t, m, ctx, "Answer:", GenParams{Sample: sample.Params{Temperature: 0}, IgnoreEOS: true})
	for !g.Done() {
		if _, err := g.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	st := g.Stats()
	if st.StopReason != StopContext || st.PromptTokens+st.GenTokens != ctx {
		t.Fatalf("%s: %d prompt + %d generated tokens in a context of %d", st.StopReason, st.PromptTokens, st.GenTokens, ctx)
	}
}

// max_tokens near 2^63 is over any context budget: refused as such, with or
// without the overflow policy, instead of overflowing the check.
func TestHugeMaxTokensIsOverTheContext(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 1)
	s, err := NewSession(m, m.Backend, Options{Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := m.EncodePrompt("Answer:")
	for _, keep := range []int{0, 4} {
		for _, n := range []int{math.MaxInt64, math.MaxInt64 - 3, math.MaxInt64 - len(prompt) + 1} {
			_, err := s.Begin(prompt, GenParams{MaxTokens: n, KeepOnOverflow: keep})
			if !errors.Is(err, ErrContextFull) {
				t.Errorf("max tokens %d, keep %d: %v, want ErrContextFull", n, keep, err)
			}
		}
	}
}

// A plain completion continues its prompt: its first piece keeps the
// leading space a SentencePiece vocabulary puts on words, which only the
// start of a whole text drops.
func TestContinuationKeepsLeadingSpace(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	greedy := sample.Params{Temperature: 0}
	for _, cont := range []bool{false, true} {
		_, g := prefilled(t, m, 128, "Answer:", GenParams{MaxTokens: 3, Sample: greedy, Continuation: cont})
		for !g.Done() {
			if _, err := g.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		st := g.Stats()
		var pieces []byte
		for _, tok := range st.Tokens {
			pieces = append(pieces, m.Tok.Piece(tok)...)
		}
		if pieces[0] != ' ' {
			t.Fatalf("the first piece %q has no leading space: the test needs one", m.Tok.Piece(st.Tokens[0]))
		}
		want := string(pieces)
		if !cont {
			want = want[1:] // a whole text (a chat reply) starts without it
		}
		if st.Text != want {
			t.Errorf("continuation %v: text %q, want %q", cont, st.Text, want)
		}
	}
}
