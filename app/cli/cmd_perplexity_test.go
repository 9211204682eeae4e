package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad flags are usage errors (exit 2), caught before the model loads.
func TestPerplexityFlags(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "absent.gguf")
	text := filepath.Join(dir, "absent.txt")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perplexity", "-m", model, "--text", text}, "--ctx"},
		{[]string{"perplexity", "-m", model, "--text", text, "--ctx", "2"}, "--ctx"},
		{[]string{"perplexity", "-m", model, "--ctx", "64"}, "--text"},
		{[]string{"perplexity", "-m", model, "--text", text, "--ctx", "64", "--kv", "q4,,q8"}, "--kv"},
		{[]string{"perplexity", "-m", model, "--text", text, "--ctx", "64", "--chunks", "-1"}, "--chunks"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %s", c.args, code, stderr, c.want)
		}
	}
}

func TestPerplexityTrainedModel(t *testing.T) {
	dir, model := trainedDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "heldout_prose.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(text, b[:4000], 0o644); err != nil {
		t.Fatal(err)
	}
	// f16 runs first as the reference although --kv does not list it;
	// batches of 16 make the scored rows read the quantized cache.
	out, stderr, code := runCLI(t, "perplexity", "-m", model, "--text", text, "--ctx", "64", "--batch", "16", "--chunks", "2", "--kv", "q8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Chunking struct {
			Tokens, Ctx, Chunks, First int
			ScoredPerChunk             int `json:"scored_per_chunk"`
		}
		Batch int
		Modes []struct {
			KV            string
			Perplexity    float64
			StdErr        float64
			Scored        int      `json:"scored_tokens"`
			Top1Agreement *float64 `json:"top1_agreement_f16"`
			Seconds       float64
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c := got.Chunking
	if c.Ctx != 64 || c.Chunks != 2 || c.First != 32 || c.ScoredPerChunk != 31 || c.Tokens < 128 || got.Batch != 16 {
		t.Errorf("chunking %+v, batch %d", c, got.Batch)
	}
	if len(got.Modes) != 2 || got.Modes[0].KV != "f16" || got.Modes[1].KV != "q8" {
		t.Fatalf("modes %+v, want f16 then q8", got.Modes)
	}
	f16, q8 := got.Modes[0], got.Modes[1]
	if f16.Scored != 62 || q8.Scored != 62 || f16.Seconds <= 0 || q8.Seconds <= 0 || f16.Top1Agreement != nil || q8.Top1Agreement == nil || *q8.Top1Agreement < 0.9 {
		t.Errorf("f16 %+v, q8 %+v", f16, q8)
	}
	if f16.Perplexity <= 1 || f16.StdErr <= 0 || q8.Perplexity/f16.Perplexity > 1.05 || q8.Perplexity/f16.Perplexity < 0.95 {
		t.Errorf("perplexity f16 %g ± %g, q8 %g", f16.Perplexity, f16.StdErr, q8.Perplexity)
	}
	// A text shorter than two chunks is refused as llama-perplexity refuses it.
	if _, stderr, code := runCLI(t, "perplexity", "-m", model, "--text", text, "--ctx", "4096"); code != 1 || !strings.Contains(stderr, "needs at least 8192") {
		t.Errorf("--ctx 4096 on a short text: exit %d, %s", code, stderr)
	}
}
