package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
	"nibble/engine/synth"
)

// probeSynth is a small llama model with attention scale 1.0 and outlier
// key channels: the KV probe rejects q4 on it.
func probeSynth(t *testing.T) string {
	t.Helper()
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 256, 4, 2, 512
	o.Type, o.Seed, o.VocabData = ggml.F16, 7, vocab.LlamaSPM
	o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = 1, 2, 20
	path := filepath.Join(t.TempDir(), "probe.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// shortPrompt keeps the probe quick under the race detector: 4 batches a run.
var shortPrompt = func() []int32 {
	p := make([]int32, 64)
	for i := range p {
		p[i] = int32(300 + 7*i)
	}
	return p
}()

// The probe runs between replies: a reply submitted while it runs ends
// normally, progress climbs to the total, and a
// switch to q8 waits for no reply and applies the new type.
func TestProbeKVRunsBetweenReplies(t *testing.T) {
	s := New(Config{Threads: 2, Slots: 1})
	t.Cleanup(func() { s.Close() })
	if _, err := s.Load(probeSynth(t), engine.Options{Ctx: 512, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var steps [][2]int
	type outcome struct {
		c   *kvprobe.Choice
		err error
	}
	res := make(chan outcome, 1)
	go func() {
		c, err := s.ProbeKV(context.Background(), "", kvprobe.ChoiceOptions{Residual: -1, Prompt: shortPrompt}, func(done, total int) {
			mu.Lock()
			steps = append(steps, [2]int{done, total})
			mu.Unlock()
		})
		res <- outcome{c, err}
	}()
	r := ask(t, s, Request{Prompt: "The lighthouse keeper wrote", Params: greedy(12)})
	if r.GenTokens == 0 || r.FinishReason != "length" {
		t.Fatalf("reply during the probe: %+v", r)
	}
	out := <-res
	if out.err != nil {
		t.Fatal(out.err)
	}
	t.Logf("probe: %s in %v", out.c.Summary(), out.c.Elapsed)
	mu.Lock()
	for i := 1; i < len(steps); i++ {
		if steps[i][0] != steps[i-1][0]+1 {
			t.Fatalf("progress went %v then %v", steps[i-1], steps[i])
		}
	}
	last := steps[len(steps)-1]
	mu.Unlock()
	if last[0] != last[1] || last[1] != 4*len(shortPrompt)/16 {
		t.Errorf("last progress %v, want four runs of %d batches", last, len(shortPrompt)/16)
	}
	info, applied, err := s.ReconfigureWhenIdle(context.Background(), func(cur ModelInfo) (engine.Options, bool) {
		o := cur.Options
		o.KV = kv.Q8
		return o, cur.Options.KV != kv.Q8
	})
	if err != nil || !applied || info.Options.KV != kv.Q8 {
		t.Fatalf("switch: applied %v, KV %s, err %v", applied, info.Options.KV, err)
	}
	if got, _ := s.Info(); got.Options.KV != kv.Q8 || got.Options.Ctx != 512 {
		t.Fatalf("after the switch: KV %s ctx %d", got.Options.KV, got.Options.Ctx)
	}
}

// Unloading ends a probe with ErrUnloaded; a cancelled context ends it too,
// and the next probe runs.
func TestProbeKVEndsWithItsModel(t *testing.T) {
	s := New(Config{Threads: 2})
	t.Cleanup(func() { s.Close() })
	path := probeSynth(t)
	if _, err := s.Load(path, engine.Options{Ctx: 512, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := s.ProbeKV(context.Background(), "", kvprobe.ChoiceOptions{Prompt: shortPrompt}, func(int, int) { once.Do(func() { close(started) }) })
		errc <- err
	}()
	<-started
	if err := s.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrUnloaded) {
		t.Fatalf("probe after unload: %v, want ErrUnloaded", err)
	}
	if _, err := s.ProbeKV(context.Background(), "", kvprobe.ChoiceOptions{}, nil); !errors.Is(err, ErrNoModel) {
		t.Fatalf("probe with no model: %v, want ErrNoModel", err)
	}
	if _, err := s.Load(path, engine.Options{Ctx: 512, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	// A probe meant for another file does not measure the model loaded now.
	if _, err := s.ProbeKV(context.Background(), path+".other", kvprobe.ChoiceOptions{Prompt: shortPrompt}, nil); !errors.Is(err, ErrUnloaded) {
		t.Fatalf("probe for another model file: %v, want ErrUnloaded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ProbeKV(ctx, path, kvprobe.ChoiceOptions{Prompt: shortPrompt}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("probe with a cancelled context: %v", err)
	}
	// The cancelled probe is dropped, not left in the way of the next.
	if c, err := s.ProbeKV(context.Background(), "", kvprobe.ChoiceOptions{Prompt: shortPrompt}, nil); err != nil || c == nil || len(c.Candidates) != 3 {
		t.Fatalf("probe after a cancelled one: %+v, %v", c, err)
	}
}

// A job whose step unloads the model (a reconfigure whose fallback also
// failed) is ended once, by the unload, and the owner goes on.
func TestIdleJobThatUnloadsEndsOnce(t *testing.T) {
	s := New(Config{Threads: 1})
	defer s.Close()
	path := modelPath(t, "tiny-llama-spm-f16.gguf")
	if _, err := s.Load(path, engine.Options{Ctx: 256, KV: kv.Q4}); err != nil {
		t.Fatal(err)
	}
	job := &idleJob{ctx: context.Background(), end: make(chan error, 1), close: func() {}}
	if err := s.do(func() error {
		job.model = s.current().m
		job.step = func() (bool, error) { return true, s.unload(ErrUnloaded) }
		s.idle = append(s.idle, job)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ended, err := s.waitJob(job); !ended || !errors.Is(err, ErrUnloaded) {
		t.Fatalf("job that unloads: ended %v, %v; want ended with ErrUnloaded", ended, err)
	}
	if _, err := s.Load(path, engine.Options{Ctx: 256, KV: kv.Q4}); err != nil {
		t.Fatalf("the scheduler after the job: %v", err)
	}
}
