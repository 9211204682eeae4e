package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/internal/testdata"
)

// trainedDir is the trained model's fixture folder, or skips t.
func trainedDir(t *testing.T) (dir, model string) {
	t.Helper()
	dir = filepath.Join(testdata.Dir(t), "trained")
	model = filepath.Join(dir, "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("skipping: the trained model is not at %s", model)
	}
	return dir, model
}

// Bad flags are usage errors (exit 2) caught before the model loads.
func TestNeedleFlags(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "absent.gguf")
	cases := filepath.Join(dir, "absent.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"needle", "-m", model}, "--cases"},
		{[]string{"needle", "-m", model, "--cases", cases, "--kv", "q4,q5"}, "--kv"},
		{[]string{"needle", "-m", model, "--cases", cases, "--kv", "f16-rot"}, "--kv"},
		{[]string{"needle", "-m", model, "--cases", cases, "--evict", "lru:10"}, "--evict"},
		{[]string{"needle", "-m", model, "--cases", cases, "--evict", "h2o:0"}, "--evict"},
		{[]string{"needle", "-m", model, "--cases", cases, "--evict", "h2o:25%,h2o:25%"}, "--evict"},
		{[]string{"needle", "-m", model, "--cases", cases, "--limit", "-1"}, "--limit"},
		{[]string{"needle", "-m", model, "--cases", cases, "extra"}, "extra"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming %s", c.args, code, stderr, c.want)
		}
	}
}

// writeNeedleCases writes a case file of short documents built from the
// held-out generated prose: two planted facts the model finds, and one
// case whose expected answer is not in its document.
func writeNeedleCases(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "heldout_generated.txt"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b[:1000])
	doc = doc[:strings.LastIndex(doc, ".")+1]
	cut := strings.Index(doc[len(doc)/2:], ". ") + len(doc)/2 + 2
	var lines []string
	for _, c := range []struct {
		name, code, answer string
		ctx                int
		depth              float64
	}{
		{"Camila Mack", "6265-96", "6265-96", 1024, 0.5},
		{"Ada Zeller", "1394-91", "1394-91", 2048, 0.5},
		{"Simon Pratt", "0748-93", "9999-99", 2048, 0.5},
	} {
		prompt := "Document:\n" + doc[:cut] + "The access code for " + c.name + " is " + c.code + ". " + doc[cut:] +
			"\nQuestion: What is the access code for " + c.name + "?\nAnswer:"
		line, err := json.Marshal(map[string]any{"prompt": prompt, "answer": c.answer, "ctx": c.ctx, "depth": c.depth})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(line))
	}
	path := filepath.Join(t.TempDir(), "cases.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNeedleTrainedModel(t *testing.T) {
	dir, model := trainedDir(t)
	cases := writeNeedleCases(t, dir)
	out, stderr, code := runCLI(t, "needle", "-m", model, "--cases", cases, "--kv", "f16,q4", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Cases int
		Ctx   int
		Modes []struct {
			KV      string
			Rotated bool
			Summary struct {
				Cells   []struct{ Ctx, Correct, Total int }
				ByCtx   []struct{ Ctx, Correct, Total int } `json:"by_ctx"`
				Overall struct{ Correct, Total int }
			}
			Results []struct {
				Line    int
				Correct bool
				Rank    int
				Margin  float32
				Output  string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// q4 is the sessions' default: K rotated.
	if got.Cases != 3 || len(got.Modes) != 2 || got.Modes[0].KV != "f16" || got.Modes[0].Rotated || got.Modes[1].KV != "q4" || !got.Modes[1].Rotated {
		t.Fatalf("cases %d, modes %+v", got.Cases, got.Modes)
	}
	for _, m := range got.Modes {
		s := m.Summary
		if s.Overall.Correct != 2 || s.Overall.Total != 3 || len(s.ByCtx) != 2 || s.ByCtx[0].Correct != 1 || s.ByCtx[1].Correct != 1 || s.ByCtx[1].Total != 2 {
			t.Errorf("%s: summary %+v, want 2/3: 1/1 at 1K, 1/2 at 2K", m.KV, s)
		}
		miss := m.Results[2]
		if miss.Correct || miss.Rank < 2 || miss.Margin >= 0 || strings.TrimSpace(miss.Output) != "0748-93" {
			t.Errorf("%s: the case whose answer is not in the document: %+v", m.KV, miss)
		}
		if hit := m.Results[0]; !hit.Correct || hit.Rank != 1 || hit.Margin <= 0 {
			t.Errorf("%s: a found fact: %+v", m.KV, hit)
		}
	}
	// The text table: one row per cell, context and the total, a column per mode.
	out, stderr, code = runCLI(t, "needle", "-m", model, "--cases", cases, "--kv", "f16", "--limit", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"1 cases", "1K 0.5", "\ntotal", "1/1", "\nseconds"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// A --ctx below what the longest case needs is refused before running.
	if _, stderr, code := runCLI(t, "needle", "-m", model, "--cases", cases, "--ctx", "100"); code != 2 || !strings.Contains(stderr, "--ctx is 100") {
		t.Errorf("--ctx 100: exit %d, %s", code, stderr)
	}
}
