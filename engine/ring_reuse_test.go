package engine

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/sample"
	"nibble/engine/synth"
)

// ringGemma3 is a random Gemma 3 with a sliding window of 16 on five of its
// six layers, on the CPU (which keeps those layers in rings of 16 slots).
func ringGemma3(t *testing.T) *Model {
	t.Helper()
	o := synth.DefaultOptions("gemma3")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Window = 6, 128, 4, 2, 256, 16
	o.Type, o.Seed, o.VocabData = ggml.F16, 11, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), "gemma3.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	b := cpu.New(2)
	m, err := LoadModel(path, b)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return m
}

// A chat longer than the sliding window keeps its cache across turns: the
// rings have wrapped, but they hold the window before the cached sequence's
// end, so a prompt that extends it prefills only its new tokens, and its
// logits are a fresh session's on the whole prompt (cosine ≥ 0.999999, f16
// KV). A prompt that leaves the cached tokens inside the wrapped region
// reuses only what the rings can go on from: nothing there, all but the
// last token when it differs only in that one, and is still right.
func TestWrappedRingReusesTheExtendedPrefix(t *testing.T) {
	t.Run("gemma3", func(t *testing.T) { testWrappedRingReuse(t, ringGemma3(t)) })
	// Gemma 4: the last two layers read the rings of layers 2 and 3.
	t.Run("gemma4", func(t *testing.T) { testWrappedRingReuse(t, ringGemma4(t)) })
}

// ringGemma4 is a random Gemma 4 with a sliding window of 16 on its even
// layers, the last two of six sharing K/V, and per-layer inputs.
func ringGemma4(t *testing.T) *Model {
	t.Helper()
	o := synth.DefaultOptions("gemma4")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.HeadDim, o.FF, o.Window = 6, 128, 4, 2, 32, 256, 16
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: 2, SharedKVLayers: 2, PerLayerEmbd: 16}
	o.Type, o.Seed, o.VocabData = ggml.F16, 11, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	b := cpu.New(2)
	m, err := LoadModel(path, b)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return m
}

func testWrappedRingReuse(t *testing.T, m *Model) {
	ctx := context.Background()
	o := Options{Ctx: 256, KV: kv.F16, Batch: 32}
	gp := GenParams{MaxTokens: 6, Sample: sample.Params{Temperature: 0}, IgnoreEOS: true}
	s, err := NewSession(m, m.Backend, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w := s.State.Cache.Config().LayerWindow; slices.Max(w) != 16 {
		t.Fatalf("cache layer windows %v, want rings of 16", w)
	}
	turn1 := m.EncodePrompt("The first turn of a chat that runs well past the sliding window of sixteen positions, so that every local layer's ring wraps, and then some more words to be sure of it.")
	if len(turn1) <= 2*16 {
		t.Fatalf("first turn of %d tokens, want more than two windows", len(turn1))
	}
	st1, err := s.Generate(ctx, turn1, gp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Evicted() {
		t.Fatalf("%d cached tokens in rings of 16 did not wrap", len(s.Tokens()))
	}
	cached := slices.Clone(s.Tokens())
	turn2 := slices.Concat(turn1, st1.Tokens, m.Tok.Encode(" And the second turn asks more.", false, false))
	if !slices.Equal(turn2[:len(cached)], cached) {
		t.Fatal("the second turn does not extend the cached tokens")
	}
	if n := s.CommonPrefix(turn2); n != len(cached) {
		t.Fatalf("CommonPrefix of the second turn = %d, want the %d cached tokens", n, len(cached))
	}

	// freshLogits is a new session's prefill of prompt.
	freshLogits := func(prompt []int32) []float32 {
		t.Helper()
		f, err := NewSession(m, m.Backend, o)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Prefill(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(f.Logits())
	}
	// turn runs prompt on s (one token, so the logits stay the prefill's),
	// checks what it reused and compares the logits with a fresh prefill.
	turn := func(name string, prompt []int32, wantReused int) {
		t.Helper()
		st, err := s.Generate(ctx, prompt, GenParams{MaxTokens: 1, Sample: sample.Params{Temperature: 0}, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.ReusedTokens != wantReused || st.PrefillTokens != len(prompt)-wantReused {
			t.Fatalf("%s: reused %d and prefilled %d of %d; want %d reused", name, st.ReusedTokens, st.PrefillTokens, len(prompt), wantReused)
		}
		c := numeric.Cosine(s.Logits(), freshLogits(prompt))
		if c < 0.999999 {
			t.Fatalf("%s: cosine with a fresh prefill %.9f, want ≥ 0.999999", name, c)
		}
		t.Logf("%s: %d tokens, reused %d, prefilled %d, cosine with a fresh prefill %.9f", name, len(prompt), st.ReusedTokens, st.PrefillTokens, c)
	}
	turn("second turn", turn2, len(cached))

	// Leaving the cached tokens where the rings have overwritten the window
	// before: nothing can be resumed there.
	cached = slices.Clone(s.Tokens())
	diverge := slices.Concat(cached[:len(cached)-20], m.Tok.Encode(" Another question instead.", false, false))
	if n := s.CommonPrefix(diverge); n != 0 {
		t.Fatalf("CommonPrefix of a prompt leaving the cache 20 tokens before its end = %d, want 0", n)
	}
	turn("diverging inside the wrapped region", diverge, 0)

	// Differing only in the last cached token: the rings still hold the
	// window before it.
	cached = slices.Clone(s.Tokens())
	last := slices.Concat(cached[:len(cached)-1], m.Tok.Encode(" Yes", false, false))
	if last[len(cached)-1] == cached[len(cached)-1] {
		t.Fatal("the replacement token equals the cached one")
	}
	turn("diverging at the last cached token", last, len(cached)-1)

	// The same prompt again recomputes only its last token's logits.
	turn("the same prompt again", last, len(last)-1)

	// Truncate keeps what can be resumed.
	n := len(s.Tokens())
	s.Truncate(n - 1)
	if got := len(s.Tokens()); got != n-1 {
		t.Fatalf("Truncate by one token kept %d of %d", got, n)
	}
	s.Truncate(n - 10)
	if got := len(s.Tokens()); got != 0 {
		t.Fatalf("Truncate past the wrap kept %d tokens, want none", got)
	}
}
