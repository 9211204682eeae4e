package cli

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/model"
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

// --arch gptoss writes gpt-oss (its files say gpt-oss) with MXFP4 experts,
// F32 sinks and YaRN, which loads, prefills and decodes on the CPU.
func TestSynthCommandGptOss(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gptoss.gguf")
	var stdout, stderr bytes.Buffer
	env := &Env{Stdout: &stdout, Stderr: &stderr}
	if code := Run(env, []string{"synth", "--arch", "gptoss", "--layers", "2", "--embd", "64", "--heads", "4", "--kv-heads", "2",
		"--head-dim", "32", "--ff", "64", "--expert-ff", "32", "--type", "q8_0", "-o", out}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch() != "gpt-oss" {
		t.Errorf("architecture %q", f.Arch())
	}
	if ft, _ := f.Uint("general.file_type"); ft != 38 {
		t.Errorf("file type %d, want 38 (MXFP4 experts)", ft)
	}
	if s, _ := f.String("gpt-oss.rope.scaling.type"); s != "yarn" {
		t.Errorf("rope scaling %q", s)
	}
	for name, typ := range map[string]string{"blk.0.ffn_gate_exps.weight": "MXFP4", "blk.1.ffn_down_exps.weight": "MXFP4",
		"blk.0.attn_sinks.weight": "F32", "blk.0.attn_output.bias": "F32", "blk.0.attn_q.weight": "Q8_0", "blk.0.ffn_gate_inp.weight": "F32"} {
		if ti, ok := f.Tensor(name); !ok || ti.Type.String() != typ {
			t.Errorf("%s: %+v, want %s", name, ti, typ)
		}
	}
	f.Close()

	b := cpu.New(2)
	defer b.Close()
	m, err := model.Open(out, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, err := m.NewState(kv.Config{Type: kv.Q8, GroupSize: 32, Ctx: 64, Residual: 8}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logits := make([]float32, m.HP.Vocab)
	prompt := []int32{1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366}
	if err := st.Forward(prompt, 0, logits); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		best := 0
		for j, x := range logits {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("step %d: logit %d is %g", i, j, x)
			}
			if x > logits[best] {
				best = j
			}
		}
		if err := st.Forward([]int32{int32(best)}, len(prompt)+i, logits); err != nil {
			t.Fatal(err)
		}
	}
}
