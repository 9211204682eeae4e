package scheduler

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"nibble/engine"
	"nibble/engine/kv"
)

// A Load racing Close never leaves a model mapped after Close returns.
func TestCloseRacingLoadLeavesNothingLoaded(t *testing.T) {
	p1 := modelPath(t, "tiny-llama-spm-q4_0.gguf")
	p2 := modelPath(t, "tiny-qwen2-q4_0.gguf")
	leaks, mapped := 0, 0
	for i := 0; i < 30; i++ {
		s := New(Config{Threads: 1})
		if _, err := s.Load(p1, engine.Options{Ctx: 256, KV: kv.Q4}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := s.Load(p2, engine.Options{Ctx: 256, KV: kv.Q4}); done <- err }()
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		s.Close()
		err := <-done
		after := strings.Count(mappedFiles(t), "tiny-qwen2-q4_0.gguf")
		_, loaded := s.Info()
		if after > mapped {
			leaks++
			t.Logf("round %d: Load err=%v; qwen2 mappings %d -> %d after Close; Info ok=%v", i, err, mapped, after, loaded)
		}
		mapped = after
	}
	if leaks > 0 {
		t.Fatalf("%d of 30 rounds leaked a loaded model past Close", leaks)
	}
}

// A reader that walks away without cancelling does not keep the stream's
// goroutine alive past Close.
func TestAbandonedStreamEndsAtClose(t *testing.T) {
	s := New(Config{Threads: 1})
	if _, err := s.Load(modelPath(t, "tiny-llama-spm-q4_0.gguf"), engine.Options{Ctx: 256, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	ch, err := s.Submit(context.Background(), Request{Prompt: "Once upon a time", Params: greedy(20)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // read one event, then walk away
	s.Close()
	pumps := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		if pumps = strings.Count(string(buf[:n]), "(*mailbox).pump"); pumps == 0 {
			break
		}
	}
	t.Logf("goroutines before %d, after Close %d; mailbox.pump goroutines alive: %d", before, runtime.NumGoroutine(), pumps)
	if pumps > 0 {
		t.Fatalf("pump goroutine leaked after Close")
	}
}

// With KeepOnOverflow, prefill progress counts towards the kept prompt and
// reaches it.
func TestProgressWithKeepReachesTheKeptPrompt(t *testing.T) {
	s := newLoaded(t, Config{Slots: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 512, Batch: 64, KV: kv.Q4})
	prompt := longPrompt(t, s, 900)
	ch, err := s.Submit(context.Background(), Request{Prompt: prompt, Params: engine.GenParams{MaxTokens: 4, KeepOnOverflow: 16}})
	if err != nil {
		t.Fatal(err)
	}
	last := Event{}
	var res *Result
	for e := range ch {
		if e.Kind == Progress {
			last = e
		}
		if e.Kind == Final {
			res = e.Result
		}
	}
	t.Logf("last progress %d/%d; result prompt=%d reused=%d prefill=%d reason=%s", last.Prefilled, last.PromptTokens, res.PromptTokens, res.ReusedTokens, res.PrefillTokens, res.FinishReason)
	if last.Prefilled != last.PromptTokens {
		t.Fatalf("prefill progress ends at %d of %d", last.Prefilled, last.PromptTokens)
	}
}

// Slots 1, QueueLimit 1: A runs and B waits, so a burst of two is never
// busy (requests about to take a free slot do not count against the limit).
func TestQueueLimitCountsOnlyWaitingRequests(t *testing.T) {
	s := newLoaded(t, Config{Slots: 1, QueueLimit: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 256, KV: kv.Q4})
	busy := 0
	for i := 0; i < 50; i++ {
		a, err := s.Submit(context.Background(), Request{Prompt: "Once upon a time", Params: greedy(2)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Submit(context.Background(), Request{Prompt: "The cat", Params: greedy(2)})
		if err != nil {
			busy++
		} else {
			collect(t, b)
		}
		collect(t, a)
	}
	if busy > 0 {
		t.Fatalf("%d of 50 bursts of 2 requests (1 slot + 1 queue place) got ErrBusy", busy)
	}
}
