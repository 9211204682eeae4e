package kvprobe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// writeProbeSynth writes a small llama synth model with the given attention
// scale (0: the usual 1/sqrt(head dim)) and outlier key channels.
func writeProbeSynth(t *testing.T, scale float32, outliers int, gain float32) string {
	t.Helper()
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 256, 4, 2, 512
	o.Type, o.Seed, o.VocabData = ggml.F16, 7, vocab.LlamaSPM
	o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = scale, outliers, gain
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// chooseOn runs Choose on the model at path with the CPU's residual
// window and logs every candidate's figures.
func chooseOn(t *testing.T, path string, wantScale float32) *Choice {
	t.Helper()
	b := cpu.New(2)
	defer b.Close()
	m, err := engine.LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.HP.AttnScale != wantScale {
		t.Fatalf("attention scale %g read from the file, want %g", m.HP.AttnScale, wantScale)
	}
	c, err := Choose(m, b, ChoiceOptions{Residual: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, cand := range c.Candidates {
		t.Logf("%-8s top-1 %6.2f%% cos %.6f max|Δlogit| %6.3f passed=%-5v %s", cand.Label(), 100*cand.Quality.Top1Agreement, cand.Quality.Cosine, cand.Quality.MaxAbsDLogit, cand.Passed, cand.Skipped)
	}
	t.Logf("%d tokens, scale ratio %.2f, probe %v: %s", c.Tokens, c.ScaleRatio, c.Elapsed.Round(1e6), c.Summary())
	return c
}

// plainQ4 is the probe's plain q4 row (measured for information beside the
// default rotated q4).
func plainQ4(t *testing.T, c *Choice) Candidate {
	t.Helper()
	for _, cand := range c.Candidates {
		if cand.Type == kv.Q4 && !cand.Rotate {
			return cand
		}
	}
	t.Fatalf("no plain q4 row among %d candidates", len(c.Candidates))
	return Candidate{}
}

// On a model with attention scale 1.0 and outlier key channels plain q4
// measurably fails (far below both thresholds) and the probe picks q8 or
// rotation; with the usual scale, outlier channels alone are caught by the
// measurement. The default q4 (rotated on the CPU) is the first candidate,
// plain q4 a row for information.
func TestChooseKVAvoidsPlainQ4WhereItFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scale    float32
		outliers int
		gain     float32
	}{{"scale1+outliers", 1, 2, 20}, {"outliers", 0, 4, 10}} {
		t.Run(tc.name, func(t *testing.T) {
			c := chooseOn(t, writeProbeSynth(t, tc.scale, tc.outliers, tc.gain), tc.scale)
			if first := c.Candidates[0]; first.Type != kv.Q4 || !first.Rotate || first.Info {
				t.Fatalf("first candidate %s (info %v), want the default q4-rot", first.Label(), first.Info)
			}
			q4 := plainQ4(t, c)
			if !q4.Info {
				t.Errorf("plain q4 is a candidate, want a row for information")
			}
			if q4.Passed || q4.Quality.Top1Agreement > 0.8 || q4.Quality.Cosine > 0.99 {
				t.Errorf("plain q4: top-1 %.4f, cosine %.6f: want a clear failure (top-1 ≤ 0.8, cosine ≤ 0.99)", q4.Quality.Top1Agreement, q4.Quality.Cosine)
			}
			if c.Type != kv.Q8 && !(c.Type == kv.Q4 && c.Rotate) {
				t.Errorf("chose %s, want q8 or q4-rot: %s", c.Chosen().Label(), c.Summary())
			}
			if tc.scale == 1 && !strings.Contains(q4.Skipped, "attention scale") {
				t.Errorf("plain q4's row says %q, want the attention scale that rules it out", q4.Skipped)
			}
		})
	}
}

// The trained model keeps the default q4, rotated.
func TestChooseKVTrainedModelKeepsQ4(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("skipping: the trained model is not at %s", path)
	}
	c := chooseOn(t, path, 0)
	if c.Type != kv.Q4 || !c.Rotate {
		t.Errorf("chose %s, want q4-rot: %s", c.Chosen().Label(), c.Summary())
	}
	if c.ScaleRatio != 1 {
		t.Errorf("scale ratio %g, want 1", c.ScaleRatio)
	}
}

func TestChooseKVRejectsShortPrompt(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	m, err := engine.LoadModel(writeProbeSynth(t, 0, 0, 0), b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := Choose(m, b, ChoiceOptions{Prompt: []int32{1, 2, 3}}); err == nil || !strings.Contains(err.Error(), "prompt tokens") {
		t.Fatalf("3-token prompt: err %v, want a prompt-length error", err)
	}
}
