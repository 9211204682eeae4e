package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/kv"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

// A session whose cache evicted positions reuses none of them: the next
// prompt, even one extending the last, is prefilled from position 0 and
// answers as a fresh session does. Below the budget nothing is evicted and
// the prefix is reused as usual.
func TestEvictingSessionReusesNothing(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	text, err := os.ReadFile(filepath.Join(testdata.Dir(t), "long_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	doc := m.EncodePrompt(strings.Repeat(string(text), 3))[:400]
	q := m.Tok.Encode("\nQuestion: what is the first number in the text?\nAnswer:", false, false)
	o := Options{Ctx: 600, KV: kv.Q4, Evict: kv.Eviction{Policy: kv.EvictH2O, Budget: 128}}
	gp := GenParams{MaxTokens: 6, Sample: sample.Params{Temperature: 0}, IgnoreEOS: true}

	s, err := NewSession(m, m.Backend, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Opts.Batch != 16 || s.Opts.Evict.Sinks != kv.DefaultSinks || s.Opts.Evict.Recent != 64 {
		t.Fatalf("resolved options: batch %d, eviction %+v; want batch 16 (an eighth of the budget) and H2O's defaults", s.Opts.Batch, s.Opts.Evict)
	}
	st1, err := s.Generate(context.Background(), doc, gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Evicted() {
		t.Fatal("a 400-token prompt in a budget of 128 evicted nothing")
	}
	follow := slices.Concat(doc, st1.Tokens, q)
	if n := s.CommonPrefix(follow); n != 0 {
		t.Fatalf("CommonPrefix after eviction = %d, want 0", n)
	}
	st2, err := s.Generate(context.Background(), follow, gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st2.ReusedTokens != 0 || st2.PrefillTokens != len(follow) {
		t.Fatalf("after eviction: reused %d, prefilled %d; want 0 and %d", st2.ReusedTokens, st2.PrefillTokens, len(follow))
	}
	fresh, err := NewSession(m, m.Backend, o)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	st3, err := fresh.Generate(context.Background(), follow, gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st2.Tokens, st3.Tokens) {
		t.Fatalf("after eviction the session answered %v, a fresh one %v", st2.Tokens, st3.Tokens)
	}
	s.Truncate(10)
	if len(s.Tokens()) != 0 {
		t.Fatalf("Truncate after eviction kept %d tokens, want none", len(s.Tokens()))
	}

	// Within the budget: no eviction, the prefix is reused.
	short := doc[:60]
	if _, err := fresh.Generate(context.Background(), short, gp, nil); err != nil {
		t.Fatal(err)
	}
	if fresh.Evicted() {
		t.Fatal("66 tokens in a budget of 128 evicted")
	}
	st4, err := fresh.Generate(context.Background(), slices.Concat(short, q), gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st4.ReusedTokens != len(short) {
		t.Fatalf("below the budget: reused %d, want %d", st4.ReusedTokens, len(short))
	}
}

// The estimate counts the budget's KV, not the context's.
func TestEvictionEstimateCountsTheBudget(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	full, _, err := Estimate(m, m.Backend, Options{Ctx: 4096, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	quarter, _, err := Estimate(m, m.Backend, Options{Ctx: 4096, KV: kv.Q4, Evict: kv.Eviction{Policy: kv.EvictH2O}, EvictPercent: 25})
	if err != nil {
		t.Fatal(err)
	}
	want := (Options{Ctx: 4096, KV: kv.Q4, Evict: kv.Eviction{Policy: kv.EvictH2O}, EvictPercent: 25}).withDefaults(m.HP).resolveResidual().KVConfig(m.HP).Bytes()
	if quarter.KV != want || quarter.KV*3 > full.KV {
		t.Fatalf("KV at a 25%% budget: %d (cache allocates %d), full context %d", quarter.KV, want, full.KV)
	}
	s, err := NewSession(m, m.Backend, Options{Ctx: 4096, KV: kv.Q4, Evict: kv.Eviction{Policy: kv.EvictH2O}, EvictPercent: 25})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.State.Cache.Config().Bytes(); got != quarter.KV {
		t.Fatalf("session cache %d bytes, estimate %d", got, quarter.KV)
	}
}
