package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/sample"
	"nibble/internal/testdata"
)

func modelPath(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(testdata.Dir(t), "models", name)
}

func newLoaded(t *testing.T, cfg Config, name string, o engine.Options) *Scheduler {
	t.Helper()
	if cfg.Threads == 0 {
		cfg.Threads = 2
	}
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(modelPath(t, name), o); err != nil {
		t.Fatal(err)
	}
	return s
}

// collect reads a stream to its end and returns the final result and the
// concatenated text of the deltas.
func collect(t *testing.T, ch <-chan Event) (*Result, string) {
	t.Helper()
	var text strings.Builder
	var res *Result
	for e := range ch {
		switch e.Kind {
		case Delta:
			text.WriteString(e.Text)
		case Final:
			if res != nil {
				t.Error("two final events")
			}
			res = e.Result
		}
	}
	if res == nil {
		t.Fatal("stream closed without a final event")
	}
	return res, text.String()
}

// ask submits r, reads its stream to the end and fails on a request error.
func ask(t *testing.T, s *Scheduler, r Request) *Result {
	t.Helper()
	ch, err := s.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	res, text := collect(t, ch)
	if res.Err != nil || text != res.Text {
		t.Fatalf("%+v, streamed %q", res, text)
	}
	return res
}

func greedy(n int) engine.GenParams {
	return engine.GenParams{MaxTokens: n, Sample: sample.Params{Temperature: 0}}
}

var questions = []string{
	"What is the capital of France?", "Name three colours.", "Count to five.", "Why is the sky blue?",
	"Write a haiku about cats.", "What is 2 + 2?", "Translate 'hello' to Spanish.", "Who wrote Hamlet?",
}

// Eight temperature-0 chat requests at once on two slots give exactly what
// each gives alone on a fresh engine.
func TestConcurrentRequestsMatchRunsAlone(t *testing.T) {
	const model = "tiny-qwen2-q4_0.gguf"
	o := engine.Options{Ctx: 256, KV: kv.Q4}
	alone := make([][]int32, len(questions))
	for i, q := range questions {
		s := newLoaded(t, Config{Slots: 1}, model, o)
		res := ask(t, s, Request{Messages: []chat.Message{{Role: "user", Content: q}}, Params: greedy(12)})
		if res.GenTokens == 0 {
			t.Fatalf("alone %d: %+v", i, res)
		}
		alone[i] = res.Tokens
		s.Close()
	}

	s := newLoaded(t, Config{Slots: 2, QueueLimit: len(questions)}, model, o)
	results := make([]*Result, len(questions))
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := s.Submit(context.Background(), Request{Messages: []chat.Message{{Role: "user", Content: q}}, Params: greedy(12)})
			if err != nil {
				t.Error(err)
				return
			}
			results[i], _ = collect(t, ch)
		}()
	}
	wg.Wait()
	slotsUsed := map[int]bool{}
	for i, res := range results {
		if res == nil {
			t.Fatalf("request %d has no result", i)
		}
		slotsUsed[res.Slot] = true
		if !slices.Equal(res.Tokens, alone[i]) {
			t.Errorf("request %d (slot %d): concurrent %v, alone %v", i, res.Slot, res.Tokens, alone[i])
		}
	}
	if len(slotsUsed) != 2 {
		t.Errorf("slots used: %v, want both", slotsUsed)
	}
}

func longPrompt(t *testing.T, s *Scheduler, minTokens int) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(testdata.Dir(t), "long_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := string(text)
	l := s.current()
	for len(l.m.EncodePrompt(prompt)) < minTokens {
		prompt += "\n" + string(text)
	}
	ids := l.m.EncodePrompt(prompt)
	return l.m.Tok.Decode(ids[:minTokens])
}

// Cancelling while a 4,000-token prompt is being read stops within one
// batch, and the tokens processed are reused by the next request.
func TestCancelDuringPrefillStopsWithinOneBatch(t *testing.T) {
	const batch = 256
	s := newLoaded(t, Config{Slots: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 4400, Batch: batch, KV: kv.Q4})
	prompt := longPrompt(t, s, 4000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Submit(ctx, Request{Prompt: prompt, Params: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	var res *Result
	progress := 0
	for e := range ch {
		switch e.Kind {
		case Progress:
			if progress++; progress == 1 {
				if e.PromptTokens < 4000 || e.Prefilled != batch {
					t.Errorf("first progress %d of %d, want %d of ≥ 4000", e.Prefilled, e.PromptTokens, batch)
				}
				cancel()
			}
		case Final:
			res = e.Result
		}
	}
	if res == nil || res.FinishReason != "cancelled" || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("result %+v, want cancelled", res)
	}
	// The batch running when the cancel arrived may finish; no more.
	if res.CachedTokens < batch || res.CachedTokens > 2*batch || res.GenTokens != 0 {
		t.Fatalf("cancelled after batch 1 with %d tokens cached and %d generated, want %d..%d and 0", res.CachedTokens, res.GenTokens, batch, 2*batch)
	}
	res2 := ask(t, s, Request{Prompt: prompt, Params: greedy(1)})
	if res2.ReusedTokens != res.CachedTokens || res2.PrefillTokens != res2.PromptTokens-res.CachedTokens {
		t.Fatalf("next request reused %d and prefilled %d of %d, want %d reused: %v", res2.ReusedTokens, res2.PrefillTokens, res2.PromptTokens, res.CachedTokens, res2.Err)
	}
	t.Logf("cancelled with %d of %d tokens cached; the next request reused them", res.CachedTokens, res2.PromptTokens)
}

// Requests beyond the slots wait in order; a full queue says busy; a
// waiting request can be cancelled.
func TestQueueOrderLimitAndCancel(t *testing.T) {
	s := newLoaded(t, Config{Slots: 1, QueueLimit: 2}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 512, KV: kv.Q4})
	long := engine.GenParams{MaxTokens: 400, IgnoreEOS: true}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a, err := s.Submit(ctxA, Request{Prompt: "Once upon a time", Params: long})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until A is running so B and C queue behind it.
	if e := <-a; e.Kind != Progress {
		t.Fatalf("first event of A: %+v", e)
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	b, err := s.Submit(ctxB, Request{Prompt: "The cat", Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Submit(context.Background(), Request{Prompt: "The dog", Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(context.Background(), Request{Prompt: "The bird", Params: greedy(2)}); !errors.Is(err, ErrBusy) {
		t.Fatalf("third waiting request: %v, want ErrBusy", err)
	}
	cancelB()
	resB, _ := collect(t, b)
	if resB.FinishReason != "cancelled" || resB.GenTokens != 0 {
		t.Fatalf("cancelled waiting request: %+v", resB)
	}
	cancelA()
	resA, _ := collect(t, a)
	if resA.FinishReason != "cancelled" || resA.GenTokens >= 400 {
		t.Fatalf("A: %+v", resA)
	}
	resC, _ := collect(t, c)
	if resC.FinishReason != "length" || resC.GenTokens != 2 || resC.QueueWait <= 0 || resC.TimeToFirstToken < resC.QueueWait {
		t.Fatalf("C after the queue: %+v", resC)
	}
}

// Load → unload → load of each shared model: the allocator goes back to its
// baseline, and the same load allocates the same bytes again.
func TestLoadUnloadReturnsEveryByte(t *testing.T) {
	s := New(Config{Threads: 2})
	defer s.Close()
	base := s.AllocatedBytes()
	for _, name := range testdata.Models {
		var first int64
		for round := range 2 {
			info, err := s.Load(modelPath(t, name), engine.Options{Ctx: 1024, KV: kv.Q4})
			if err != nil {
				t.Fatal(err)
			}
			got := s.AllocatedBytes() - base
			if round == 0 {
				first = got
			} else if got != first {
				t.Errorf("%s: second load allocated %d bytes, first %d", name, got, first)
			}
			if want := info.Estimate.KV + info.Estimate.Scratch; got != want {
				t.Errorf("%s: allocated %d bytes, the estimate's KV + scratch is %d", name, got, want)
			}
			ask(t, s, Request{Prompt: "Hello", Params: greedy(3)})
			if err := s.Unload(); err != nil {
				t.Fatal(err)
			}
			if got := s.AllocatedBytes(); got != base {
				t.Fatalf("%s: after unload %d bytes allocated, baseline %d", name, got, base)
			}
			if mapped := mappedFiles(t); strings.Contains(mapped, name) {
				t.Fatalf("%s is still mapped after unload", name)
			}
		}
	}
}

// Unloading or switching models ends running and waiting requests with
// ErrUnloaded; a reconfiguration that does not fit keeps the old settings.
func TestSwitchAndReconfigure(t *testing.T) {
	s := newLoaded(t, Config{Slots: 1}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 512, KV: kv.Q4})
	ch, err := s.Submit(context.Background(), Request{Prompt: "Once upon a time", Params: engine.GenParams{MaxTokens: 400, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // running
	if _, err := s.Load(modelPath(t, "tiny-qwen2-q4_0.gguf"), engine.Options{Ctx: 512}); err != nil {
		t.Fatal(err)
	}
	res, _ := collect(t, ch)
	if res.FinishReason != "cancelled" || !errors.Is(res.Err, ErrUnloaded) {
		t.Fatalf("request on the old model: %+v", res)
	}
	info, _ := s.Info()
	if info.Arch != "qwen2" || info.Options.KV != kv.F16 || info.Options.Ctx != 512 {
		t.Fatalf("info after the switch: %+v", info)
	}
	before := s.AllocatedBytes()
	info, err = s.Reconfigure(engine.Options{Ctx: 2048, KV: kv.F16})
	if err != nil {
		t.Fatal(err)
	}
	if info.Options.Ctx != 2048 || info.Options.KV != kv.F16 || s.AllocatedBytes() <= before {
		t.Fatalf("reconfigured: %+v, %d bytes (was %d)", info.Options, s.AllocatedBytes(), before)
	}
	tiny := estimate.Simulated(64 << 20)
	_, err = s.Reconfigure(engine.Options{Ctx: 32768, KV: kv.F16, Budget: &tiny})
	var nf *estimate.NotFitError
	if !errors.As(err, &nf) {
		t.Fatalf("reconfigure beyond the budget: %v, want NotFitError", err)
	}
	if info, ok := s.Info(); !ok || info.Options.Ctx != 2048 {
		t.Fatalf("after a refused reconfigure: %+v %v", info.Options, ok)
	}
	if res := ask(t, s, Request{Prompt: "Still here", Params: greedy(2)}); res.GenTokens != 2 {
		t.Fatalf("after a refused reconfigure: %+v", res)
	}
}

// A second slot is allocated only when requests overlap and the budget holds
// one more session.
func TestSecondSlotOnlyWhenItFits(t *testing.T) {
	name := "tiny-llama-spm-q4_0.gguf"
	probe := newLoaded(t, Config{Slots: 1}, name, engine.Options{Ctx: 2048, KV: kv.F16})
	info, _ := probe.Info()
	one := info.Estimate.Total
	probe.Close()
	for _, c := range []struct {
		budget int64
		want   int // distinct slots used
	}{
		{one + (info.Estimate.KV+info.Estimate.Scratch)/2, 1},
		{one + info.Estimate.KV + info.Estimate.Scratch, 1}, // fits, but tight: no second slot
		{int64(float64(one+info.Estimate.KV+info.Estimate.Scratch)/estimate.TightFraction) + 1, 2},
	} {
		budget := estimate.Simulated(c.budget)
		s := newLoaded(t, Config{Slots: 2}, name, engine.Options{Ctx: 2048, KV: kv.F16, Budget: &budget})
		var chans []<-chan Event
		for i := range 2 {
			ch, err := s.Submit(context.Background(), Request{Prompt: fmt.Sprintf("Story %d:", i), Params: greedy(8)})
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		used := map[int]bool{}
		for _, ch := range chans {
			res, _ := collect(t, ch)
			used[res.Slot] = true
		}
		if len(used) != c.want {
			t.Errorf("budget %d: %d slots used, want %d", c.budget, len(used), c.want)
		}
		s.Close()
	}
}

// A follow-up about a document goes to the slot that holds it, while a
// second slot serves another document, so neither cache is thrown away.
func TestFollowUpGoesToTheSlotHoldingItsPrefix(t *testing.T) {
	s := newLoaded(t, Config{Slots: 2}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 1024, KV: kv.Q4})
	docA := longPrompt(t, s, 300)
	docB := strings.Repeat("An entirely different document about gardening. ", 30)
	ask := func(doc, q string) *Result {
		return ask(t, s, Request{Prompt: doc + "\nQuestion: " + q + "\nAnswer:", Params: greedy(4)})
	}
	a1 := ask(docA, "what is it about?")
	b1 := ask(docB, "what grows?")
	a2 := ask(docA, "who wrote it?")
	b2 := ask(docB, "when?")
	if a1.Slot == b1.Slot || a2.Slot != a1.Slot || b2.Slot != b1.Slot {
		t.Fatalf("slots: A %d then %d, B %d then %d", a1.Slot, a2.Slot, b1.Slot, b2.Slot)
	}
	if a2.ReusedTokens < 300 || b2.ReusedTokens < 200 || a2.PrefillTokens > 20 {
		t.Fatalf("follow-ups reused %d (prefilled %d) and %d tokens", a2.ReusedTokens, a2.PrefillTokens, b2.ReusedTokens)
	}
}

// Prefill progress, time to first token and throughputs are reported.
func TestStreamReportsProgressAndTimings(t *testing.T) {
	s := newLoaded(t, Config{}, "tiny-llama3-q8_0.gguf", engine.Options{Ctx: 1024, Batch: 64})
	ch, err := s.Submit(context.Background(), Request{Messages: []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: strings.Repeat("Tell me a story. ", 20)}}, Params: greedy(6)})
	if err != nil {
		t.Fatal(err)
	}
	var progress []int
	var res *Result
	deadline := time.After(time.Minute)
	for done := false; !done; {
		select {
		case e, ok := <-ch:
			if !ok {
				done = true
				break
			}
			if e.Kind == Progress {
				progress = append(progress, e.Prefilled)
			}
			if e.Kind == Final {
				res = e.Result
			}
		case <-deadline:
			t.Fatal("no final event within a minute")
		}
	}
	if len(progress) < 2 || progress[len(progress)-1] != res.PromptTokens || !slices.IsSorted(progress) {
		t.Fatalf("progress %v for %d prompt tokens", progress, res.PromptTokens)
	}
	if res.TimeToFirstToken <= 0 || res.PrefillTokPerSec <= 0 || res.DecodeTokPerSec <= 0 || res.FinishReason == "error" {
		t.Fatalf("result %+v", res)
	}
}

func TestSubmitErrors(t *testing.T) {
	s := New(Config{Threads: 1})
	if _, err := s.Submit(context.Background(), Request{Prompt: "x"}); !errors.Is(err, ErrNoModel) {
		t.Fatalf("no model: %v", err)
	}
	s.Close()
	if _, err := s.Submit(context.Background(), Request{Prompt: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	s = newLoaded(t, Config{}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 64})
	if _, err := s.Submit(context.Background(), Request{Prompt: strings.Repeat("many words here ", 40), Params: greedy(8)}); !errors.Is(err, engine.ErrContextFull) {
		t.Fatalf("over the context: %v", err)
	}
	if _, err := s.Submit(context.Background(), Request{}); err == nil {
		t.Fatal("an empty request was accepted")
	}
}

// max_tokens near 2^63 is over the context budget: refused, not an overflow
// that lets the request run to the context's end.
func TestHugeMaxTokensIsRefused(t *testing.T) {
	s := newLoaded(t, Config{}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 64})
	for _, n := range []int{math.MaxInt64, math.MaxInt64 - 1} {
		if _, err := s.Submit(context.Background(), Request{Prompt: "Answer:", Params: greedy(n)}); !errors.Is(err, engine.ErrContextFull) {
			t.Errorf("max tokens %d: %v, want ErrContextFull", n, err)
		}
	}
}

// A plain completion continues its prompt, so its text keeps the first
// piece's leading space ("Answer:" → " 6265-96", as llama-server gives);
// a chat reply is a whole text and starts without it, as before.
func TestCompletionKeepsLeadingSpaceChatDoesNot(t *testing.T) {
	s := newLoaded(t, Config{}, "tiny-llama-spm-q4_0.gguf", engine.Options{Ctx: 256})
	tok := s.loaded.m.Tok
	pieces := func(ids []int32) string {
		var b []byte
		for _, id := range ids {
			b = append(b, tok.Piece(id)...)
		}
		return string(b)
	}
	res := ask(t, s, Request{Prompt: "Answer:", Params: greedy(3)})
	want := pieces(res.Tokens)
	if !strings.HasPrefix(want, " ") {
		t.Fatalf("the first piece %q has no leading space: the test needs one", want)
	}
	if res.Text != want {
		t.Errorf("completion %q, want %q", res.Text, want)
	}
	res = ask(t, s, Request{Messages: []chat.Message{{Role: "user", Content: "Once upon a time"}}, Params: greedy(3)})
	want = pieces(res.Tokens)
	if !strings.HasPrefix(want, " ") {
		t.Fatalf("the reply's first piece %q has no leading space: the test needs one", want)
	}
	if res.Text != want[1:] {
		t.Errorf("chat reply %q, want %q", res.Text, want[1:])
	}
}
