package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/internal/testdata"
)

// trainedModel is the small trained model of the shared test data (a
// trained model's K has the outlier channels smoothing scales; random
// weights hardly do), or a skip when the test data lacks it.
func trainedModel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the trained test model is absent (%v): temperature-0 reproducibility is not checked", err)
	}
	return p
}

// docPrompts are n completion prompts that share a document and continue
// it with different prose (the model's least certain output, where a
// changed code in the cache shows first). The document is padded to a
// multiple of batch tokens, so that a prompt reusing it from the cache
// prefills the rest in the batches a cold run of the prompt uses.
func docPrompts(t *testing.T, path string, n, batch int) []string {
	t.Helper()
	prose, err := os.ReadFile(filepath.Join(testdata.Dir(t), "trained", "heldout_prose.txt"))
	if err != nil {
		t.Skipf("the trained test model's prose is absent: %v", err)
	}
	b := cpu.New(1)
	defer b.Close()
	m, err := engine.LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lines := strings.Split(string(prose), "\n")
	var base strings.Builder
	base.WriteString("Document:\n")
	for i, name := range []string{"Camila Mack", "Ivo Brandt", "Lena Ortiz", "Tomas Reyes", "Ada Moss", "Kofi Mensah", "Yuki Sato", "Mira Holm"} {
		base.WriteString(lines[i] + "\nThe access code for " + name + " is " + []string{"6265-96", "1834-20", "7719-45", "3302-81", "5546-07", "9021-63", "4478-12", "2390-58"}[i] + ".\n")
	}
	for pad := range 4 * batch {
		doc := base.String() + strings.Repeat("so ", pad) + "end.\n"
		ids := m.EncodePrompt(doc)
		if len(ids)%batch != 0 {
			continue
		}
		p := make([]string, n)
		for i := range n {
			p[i] = doc + lines[20+i]
			if !slices.Equal(m.EncodePrompt(p[i])[:len(ids)], ids) {
				t.Fatalf("prompt %d does not start with the document's tokens", i)
			}
		}
		return p
	}
	t.Fatalf("no padding makes the document a multiple of %d tokens", batch)
	return nil
}

// TestTemperatureZeroIsReproducible: with the default quantized cache, a
// greedy request gives the same text cold or over a prefix another prompt
// cached, and alone or beside 7 others on 8 slots. The model's smoothing is
// calibrated on a fixed text, the same for every load.
// Bit-exact reuse needs more than the smoothing: the same prompt again
// reuses all but its last token, which a cold run computes otherwise
// (in-batch rows attend in float, cached ones as stored), so
// engine.Options.ExactReuse reuses whole prefill batches only; and the
// float window of recent positions (KVResidual) is lost once the cache has
// gone past the reuse point, so it is off here.
func TestTemperatureZeroIsReproducible(t *testing.T) {
	path := trainedModel(t)
	const slots, batch = 8, 32
	prompts := docPrompts(t, path, slots, batch)
	req := func(p string) Request { return Request{Prompt: p, Params: greedy(48)} }
	calibrating := Request{Prompt: "Question: What is the access code for Nobody?\nAnswer: 0000-00.\n", Params: greedy(4)}
	// Under the race detector (ten times slower) the q4 cache and one
	// repeat are enough: what it looks for is in the concurrent part.
	types, repeats := []kv.Type{kv.Q4, kv.Q8}, 3
	if raceEnabled {
		types, repeats = types[:1], 1
	}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			opts := engine.Options{Ctx: 1024, KV: typ, Batch: batch, ExactReuse: true, KVResidual: -1}
			load := func(n int) *Scheduler {
				s := New(Config{Slots: n, Threads: 2, QueueLimit: 2 * n})
				t.Cleanup(func() { s.Close() })
				if _, err := s.Load(path, opts); err != nil {
					t.Fatal(err)
				}
				ask(t, s, calibrating)
				return s
			}
			// Alone and cold: another prompt in the only slot first.
			one := load(1)
			cold := make([]string, slots)
			for i, p := range prompts {
				res := ask(t, one, req(p))
				if res.CachedTokens > len(p) {
					t.Fatalf("prompt %d reused a cache", i)
				}
				cold[i] = res.Text
				ask(t, one, calibrating)
			}
			// Alone and warm: each prompt reuses the document the previous
			// one cached, then its own cache twice.
			ask(t, one, req(prompts[slots-1]))
			for i, p := range prompts {
				for run := range repeats {
					if res := ask(t, one, req(p)); res.Text != cold[i] {
						t.Errorf("prompt %d, run %d over a cached document (%d cached tokens): %q; cold: %q", i, run, res.CachedTokens, res.Text, cold[i])
					}
				}
			}
			// Together: all at once on 8 slots of another load.
			many := load(slots)
			together := make([]string, slots)
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Go(func() {
					ch, err := many.Submit(context.Background(), req(p))
					if err != nil {
						t.Error(err)
						return
					}
					res, _ := collect(t, ch)
					together[i] = res.Text
				})
			}
			wg.Wait()
			for i := range prompts {
				if together[i] != cold[i] {
					t.Errorf("prompt %d: together %q, alone %q", i, together[i], cold[i])
				}
			}
		})
	}
}
