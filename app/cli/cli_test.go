package cli

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestIntFlagAtLeast(t *testing.T) {
	if err := intFlagAtLeast("--reps", 1, 1); err != nil {
		t.Fatalf("1 >= 1: %v", err)
	}
	err := intFlagAtLeast("--reps", 0, 1)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--reps") || !strings.Contains(err.Error(), "0") {
		t.Fatalf("0 < 1: %v, want a usage error naming --reps and the value", err)
	}
}

// Every out-of-range numeric flag is a usage error (exit 2) that names the flag and its value,
// caught before any file is opened (the model paths here do not exist).
func TestInvalidNumericFlags(t *testing.T) {
	model := filepath.Join(t.TempDir(), "absent.gguf")
	out := filepath.Join(t.TempDir(), "out.gguf")
	synth := []string{"synth", "--layers", "1", "--embd", "64", "--heads", "4", "--ff", "96", "-o", out}
	cases := []struct {
		flag string
		args []string
	}{
		{"--top", []string{"logits", "-m", model, "--prompt", "x", "--top", "-1"}},

		{"--pp", []string{"bench", "decode", "-m", model, "--pp", "0"}},
		{"--tg", []string{"bench", "decode", "-m", model, "--tg", "1"}},
		{"--reps", []string{"bench", "decode", "-m", model, "--reps", "-1"}},
		{"--depth", []string{"bench", "decode", "-m", model, "--depth", "0,-5"}},
		{"--backend", []string{"bench", "decode", "-m", model, "--backend", "gpu"}},
		{"--backend", []string{"run", "-m", model, "-p", "x", "--backend", "tpu"}},

		{"--n", []string{"bench", "attention", "--n", "-3"}},
		{"--n", []string{"bench", "attention", "--n", "0"}},
		{"--d", []string{"bench", "attention", "--d", "-64"}},
		{"--hq", []string{"bench", "attention", "--hq", "0"}},
		{"--hkv", []string{"bench", "attention", "--hkv", "-8"}},
		{"--threads", []string{"bench", "attention", "--threads", "-1"}},
		{"--reps", []string{"bench", "attention", "--reps", "0"}},

		{"--batch", []string{"kvcheck", "-m", model, "--prompt-file", model, "--batch", "0"}},
		{"--greedy", []string{"kvcheck", "-m", model, "--prompt-file", model, "--greedy", "-1"}},
		{"--threads", []string{"kvcheck", "-m", model, "--prompt-file", model, "--threads", "-2"}},

		{"--ctx", []string{"estimate", "-m", model, "--ctx", "-1"}},
		{"--batch", []string{"estimate", "-m", model, "--batch", "0"}},
		{"--threads", []string{"estimate", "-m", model, "--threads", "-4"}},

		{"--layers", slices.Concat(synth, []string{"--layers", "-1"})},
		{"--embd", slices.Concat(synth, []string{"--embd", "-64"})},
		{"--heads", slices.Concat(synth, []string{"--heads", "-4"})},
		{"--kv-heads", slices.Concat(synth, []string{"--kv-heads", "-2"})},
		{"--ff", slices.Concat(synth, []string{"--ff", "-96"})},
		{"--ctx", slices.Concat(synth, []string{"--ctx", "-1"})},
		{"--rope-base", slices.Concat(synth, []string{"--rope-base", "-1"})},
		{"--rope-base", slices.Concat(synth, []string{"--rope-base", "NaN"})},
		{"--attn-scale", slices.Concat(synth, []string{"--attn-scale", "-1"})},
		{"--attn-scale", slices.Concat(synth, []string{"--attn-scale", "NaN"})},
		{"--key-outliers", slices.Concat(synth, []string{"--key-outliers", "-2"})},
		{"--key-outlier-gain", slices.Concat(synth, []string{"--key-outlier-gain", "0"})},
	}
	for _, c := range cases {
		_, stderr, code := runCLI(t, c.args...)
		// The first line is the error; the usage line after it names every flag. The error must
		// say which flag is wrong and what it got, not list all the constraints.
		msg, _, _ := strings.Cut(stderr, "\n")
		value := c.args[len(c.args)-1]
		if code != 2 || !strings.Contains(msg, c.flag+" ") || !strings.Contains(msg, "got "+value) && !strings.Contains(msg, "got \""+value) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error (2) naming %s and %s", c.args, code, stderr, c.flag, value)
		}
	}
}
