package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/gguf"
)

func TestSynthCommand(t *testing.T) {
	wd, _ := os.Getwd()
	vocab := filepath.Join(wd, "..", "..", "..", "shared", "testdata", "tokenizer", "ggml-vocab-gpt-2.gguf")
	if _, err := os.Stat(vocab); err != nil {
		t.Skipf("shared test data absent: %v", err)
	}
	out := filepath.Join(t.TempDir(), "q.gguf")
	var stdout, stderr bytes.Buffer
	env := &Env{Stdout: &stdout, Stderr: &stderr}
	code := Run(env, []string{"synth", "--arch", "qwen2", "--layers", "1", "--embd", "64", "--heads", "4", "--kv-heads", "2",
		"--ff", "96", "--vocab-from", vocab, "--type", "q8_0", "--seed", "3", "-o", out})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), out) || !strings.Contains(stdout.String(), "bytes") {
		t.Errorf("stdout %q should name the output and its size", stdout.String())
	}
	// Not a terminal: a few whole lines, ending at 100%.
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[3], "100%") || strings.Contains(stderr.String(), "\r") {
		t.Errorf("stderr progress = %q", stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.Tensor("output.weight"); !ok {
		t.Errorf("qwen2 default should be untied")
	}
	if ti, ok := f.Tensor("blk.0.attn_q.weight"); !ok || ti.Type.String() != "Q8_0" {
		t.Errorf("attn_q = %+v", ti)
	}

	stderr.Reset()
	if code := Run(env, []string{"synth", "--layers", "1", "-o", out}); code != 2 {
		t.Errorf("missing flags: exit %d, want 2", code)
	}
	if code := Run(env, []string{"synth", "--layers", "1", "--embd", "64", "--heads", "4", "--ff", "96",
		"--vocab-from", vocab, "--type", "q4_k", "-o", out}); code != 2 || !strings.Contains(stderr.String(), "q4_k") {
		t.Errorf("bad type: exit %d, %s", code, stderr.String())
	}
}
