package scheduler

import (
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
)

// A follow-up that extends a conversation longer than the sliding window
// goes to the slot holding it and reuses every cached token, though the
// slot's rings (a Gemma 3 with a window of 16) have wrapped; the slot used
// least recently is another one, so only the reusable prefix can pick it.
func TestFollowUpReusesAWrappedRing(t *testing.T) {
	o := synth.DefaultOptions("gemma3")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Window = 6, 128, 4, 2, 256, 16
	o.Type, o.Seed, o.VocabData = ggml.F16, 11, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), "gemma3.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Threads: 2, Slots: 2})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(path, engine.Options{Ctx: 512, KV: kv.F16}); err != nil {
		t.Fatal(err)
	}
	docA := strings.Repeat("A long note about rivers and the towns along them. ", 6)
	docB := strings.Repeat("Another note, this one about mountains and snow. ", 6)
	b1 := ask(t, s, Request{Prompt: docB, Params: greedy(1)})
	a1 := ask(t, s, Request{Prompt: docA, Params: greedy(1)})
	if a1.Slot == b1.Slot {
		t.Fatalf("both documents went to slot %d", a1.Slot)
	}
	if a1.CachedTokens <= 4*16 {
		t.Fatalf("document A cached %d tokens, want several windows of 16", a1.CachedTokens)
	}
	a2 := ask(t, s, Request{Prompt: docA + "\nWhich town is the largest?", Params: greedy(1)})
	if a2.Slot != a1.Slot || a2.ReusedTokens != a1.CachedTokens || a2.PrefillTokens != a2.PromptTokens-a1.CachedTokens {
		t.Fatalf("follow-up on slot %d reused %d and prefilled %d of %d; want slot %d and the %d cached tokens reused",
			a2.Slot, a2.ReusedTokens, a2.PrefillTokens, a2.PromptTokens, a1.Slot, a1.CachedTokens)
	}
	t.Logf("follow-up of %d tokens reused the %d cached on slot %d", a2.PromptTokens, a2.ReusedTokens, a2.Slot)
}
