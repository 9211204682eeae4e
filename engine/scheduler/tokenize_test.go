package scheduler

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"nibble/engine"
	"nibble/engine/chat"
)

// allocated is how many bytes f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A prompt longer in bytes than any tokenization could fit in the context
// is refused by its length, before it is tokenized.
func TestLongPromptIsRefusedByItsLength(t *testing.T) {
	s := newLoaded(t, Config{}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 4096})
	long := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 8<<20/45)
	for name, r := range map[string]Request{
		"prompt": {Prompt: long, Params: greedy(1)},
		"chat":   {Messages: []chat.Message{{Role: "user", Content: long}}, Params: greedy(1)},
	} {
		var err error
		// Tokenizing 8 MiB allocates hundreds of MB; a chat's rendering
		// copies the text a few times.
		n := allocated(func() { _, err = s.Submit(context.Background(), r) })
		if !errors.Is(err, engine.ErrContextFull) || !strings.Contains(err.Error(), "bytes make at least") {
			t.Errorf("%s: %v, want a context-full error by length", name, err)
		}
		if n > 128<<20 {
			t.Errorf("%s: refusing an 8 MiB text allocated %d MB: it was tokenized", name, n>>20)
		}
	}
}

// The byte bound is sound: a text it lets through can fit, one it refuses
// cannot (every token stands for at most maxTokenBytes bytes).
func TestByteBoundNeverRefusesWhatFits(t *testing.T) {
	s := newLoaded(t, Config{}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 4096})
	l := s.current()
	maxPiece := l.maxPiece()
	for _, text := range []string{strings.Repeat(" ", 5000), strings.Repeat("abc", 3000), strings.Repeat("日本語", 800), strings.Repeat("\x00\xff", 2000)} {
		ids := l.m.EncodePrompt(text)
		if refuseByLength(len(text), maxPiece, len(ids)) != nil {
			t.Errorf("%q…: %d bytes, %d tokens, longest piece %d bytes: refused a text of exactly the context's tokens", text[:6], len(text), len(ids), maxPiece)
		}
	}
}

// No more requests are tokenized at once than Config.Tokenizers.
func TestTokenizationIsBounded(t *testing.T) {
	s := newLoaded(t, Config{Tokenizers: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 4096})
	// Long enough to take a while, short enough to pass the byte bound;
	// still too many tokens for the context.
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 4096*2/10)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := s.Submit(context.Background(), Request{Prompt: text, Params: greedy(1)}); !errors.Is(err, engine.ErrContextFull) {
				t.Errorf("%v, want a context-full error after tokenizing", err)
			}
		})
	}
	wg.Wait()
	if p := s.tokenizers.peak.Load(); p != 1 {
		t.Errorf("%d requests were tokenized at once, want 1", p)
	}
}
