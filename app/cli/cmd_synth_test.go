package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
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

// --arch qwen3moe and mixtral write experts: the counts and widths asked
// for, 3-D expert tensors, an F32 router; mixtral says llama.
func TestSynthCommandExperts(t *testing.T) {
	for _, c := range []struct {
		arch, archKey string
		args          []string
		exps          []uint64
	}{
		{"qwen3moe", "qwen3moe", []string{"--experts", "16", "--experts-used", "4", "--expert-ff", "32"}, []uint64{64, 32, 16}},
		{"mixtral", "llama", nil, []uint64{64, 96, 8}},
	} {
		out := filepath.Join(t.TempDir(), c.arch+".gguf")
		var stdout, stderr bytes.Buffer
		env := &Env{Stdout: &stdout, Stderr: &stderr}
		args := append([]string{"synth", "--arch", c.arch, "--layers", "1", "--embd", "64", "--heads", "4", "--ff", "96", "--type", "q4_0", "-o", out}, c.args...)
		if code := Run(env, args); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.arch, code, stderr.String())
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if f.Arch() != c.archKey {
			t.Errorf("%s: architecture %q", c.arch, f.Arch())
		}
		if n, _ := f.Uint(c.archKey + ".expert_count"); n != c.exps[2] {
			t.Errorf("%s: expert_count %d", c.arch, n)
		}
		if ti, ok := f.Tensor("blk.0.ffn_up_exps.weight"); !ok || !slices.Equal(ti.Dims, c.exps) || ti.Type.String() != "Q4_0" {
			t.Errorf("%s: ffn_up_exps %+v", c.arch, ti)
		}
		if ti, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); !ok || ti.Type.String() != "F32" {
			t.Errorf("%s: router %+v", c.arch, ti)
		}
		f.Close()
	}
	var stderr bytes.Buffer
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &stderr}
	if code := Run(env, []string{"synth", "--arch", "mixtral", "--layers", "1", "--embd", "64", "--heads", "4", "--ff", "96",
		"--expert-ff", "64", "-o", filepath.Join(t.TempDir(), "x.gguf")}); code == 0 || !strings.Contains(stderr.String(), "ff (96) wide") {
		t.Errorf("mixtral with another expert width: exit %d, %s", code, stderr.String())
	}
}
