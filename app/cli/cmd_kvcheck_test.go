package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/internal/testdata"
)

// kvcheck prints the trained-model thresholds as pass/fail lines that
// follow from its own figures, and keeps printing the noise floor.
func TestKVCheckThresholds(t *testing.T) {
	td := testdata.Dir(t)
	path := filepath.Join(td, "models", "tiny-llama-spm-f16.gguf")
	// A short prompt: the noise floor runs it one token at a time.
	prompt := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(prompt, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "kvcheck", "-m", path, "--prompt-file", prompt, "--batch", "64", "--greedy", "6", "--json")
	if code != 0 {
		t.Fatalf("kvcheck exit %d: %s", code, stderr)
	}
	var kc struct {
		Types map[string]struct {
			Top1Agreement float64 `json:"top1_agreement"`
			GreedyForced  int     `json:"greedy_teacher_forced"`
			GreedyTotal   int     `json:"greedy_total"`
		}
		Thresholds []struct {
			KV, Metric, Value, Want string
			Bound                   float64
			Pass                    bool
		}
	}
	if err := json.Unmarshal([]byte(out), &kc); err != nil || len(kc.Thresholds) != 3 {
		t.Fatalf("kvcheck --json = %s (err %v), want three thresholds", out, err)
	}
	for _, th := range kc.Thresholds {
		q := kc.Types[th.KV]
		var pass bool
		switch th.Metric {
		case "top1":
			pass = q.Top1Agreement >= th.Bound
		case "forced":
			pass = q.GreedyForced >= q.GreedyTotal-int(th.Bound)
			if th.Want != "≥ 5/6" {
				t.Errorf("forced threshold over 6 greedy tokens: want %q, not ≥ 5/6", th.Want)
			}
		default:
			t.Errorf("unknown metric %q", th.Metric)
		}
		if pass != th.Pass {
			t.Errorf("%s %s: pass %v, but the figures say %v (%+v)", th.KV, th.Metric, th.Pass, pass, q)
		}
	}
	out, stderr, code = runCLI(t, "kvcheck", "-m", path, "--prompt-file", prompt, "--batch", "64", "--greedy", "6")
	if code != 0 {
		t.Fatalf("kvcheck exit %d: %s", code, stderr)
	}
	// The thresholds judge the default mode: q4 rotated, q8 not.
	for _, want := range []string{"the noise floor", "thresholds for --kv-rotate auto", "q4 (rotated)   top1", "q4 (rotated)   forced", "q8             top1"} {
		if !strings.Contains(out, want) {
			t.Errorf("kvcheck output lacks %q:\n%s", want, out)
		}
	}
}

// kvcheck's --kv-rotate resolves per type as sessions do; --rotate, from
// before it, is on; anything else is a usage error.
func TestKVCheckRotateFlags(t *testing.T) {
	path := filepath.Join(testdata.Dir(t), "models", "tiny-llama-spm-f16.gguf")
	prompt := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(prompt, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags  []string
		mode   string
		q8, q4 bool
	}{{nil, "auto", false, true}, {[]string{"--kv-rotate", "off"}, "off", false, false}, {[]string{"--rotate"}, "on", true, true}} {
		args := append([]string{"kvcheck", "-m", path, "--prompt-file", prompt, "--batch", "64", "--greedy", "2", "--json"}, c.flags...)
		out, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, stderr)
		}
		var kc struct {
			Rotate  string
			Rotated map[string]bool
		}
		if err := json.Unmarshal([]byte(out), &kc); err != nil || kc.Rotate != c.mode || kc.Rotated["q8"] != c.q8 || kc.Rotated["q4"] != c.q4 {
			t.Errorf("%v: rotate %q, rotated %v (err %v); want %s, q8 %v, q4 %v", c.flags, kc.Rotate, kc.Rotated, err, c.mode, c.q8, c.q4)
		}
	}
	if _, stderr, code := runCLI(t, "kvcheck", "-m", path, "--prompt-file", prompt, "--kv-rotate", "sideways"); code != 2 || !strings.Contains(stderr, "auto, on or off") {
		t.Errorf("--kv-rotate sideways: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
