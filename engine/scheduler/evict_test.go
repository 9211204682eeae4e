package scheduler

import (
	"context"
	"testing"

	"nibble/engine"
	"nibble/engine/kv"
)

// A slot whose cache evicted positions is not picked for its prefix: the
// next request that extends the last prompt reuses nothing, where a cache
// that kept everything would have reused it all.
func TestEvictedSlotReusesNothing(t *testing.T) {
	for _, tc := range []struct {
		evict      kv.Eviction
		wantReused bool
	}{{kv.Eviction{}, true}, {kv.Eviction{Policy: kv.EvictH2O, Budget: 96}, false}, {kv.Eviction{Policy: kv.EvictWindow, Budget: 96}, false}} {
		t.Run(tc.evict.Policy.String(), func(t *testing.T) {
			s := newLoaded(t, Config{Slots: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 600, KV: kv.Q4, Evict: tc.evict})
			prompt := longPrompt(t, s, 300)
			ch, err := s.Submit(context.Background(), Request{Prompt: prompt, Params: greedy(4)})
			if err != nil {
				t.Fatal(err)
			}
			first, text := collect(t, ch)
			if first.Err != nil {
				t.Fatal(first.Err)
			}
			ch, err = s.Submit(context.Background(), Request{Prompt: prompt + text + " And then?", Params: greedy(4)})
			if err != nil {
				t.Fatal(err)
			}
			second, _ := collect(t, ch)
			if second.Err != nil {
				t.Fatal(second.Err)
			}
			if reused := second.ReusedTokens > 0; reused != tc.wantReused {
				t.Fatalf("second request reused %d of %d prompt tokens; want reuse %v", second.ReusedTokens, second.PromptTokens, tc.wantReused)
			}
			if !tc.wantReused && second.PrefillTokens != second.PromptTokens {
				t.Fatalf("prefilled %d of %d prompt tokens after an eviction", second.PrefillTokens, second.PromptTokens)
			}
		})
	}
}
