package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/synth"
)

func TestQuantizeCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "f16.gguf")
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.VocabData = 1, 64, 4, 2, 96, vocab.LlamaSPM
	if err := synth.Generate(in, o); err != nil {
		t.Fatal(err)
	}
	tpl := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(tpl, []byte("{% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "q.gguf")
	var stdout, stderr bytes.Buffer
	env := &Env{Stdout: &stdout, Stderr: &stderr}
	code := Run(env, []string{"quantize", "-m", in, "-o", out, "--type", "q4_0", "--embed-type", "q8_0",
		"--chat-template", tpl, "--override", "tokenizer.ggml.eot_token_id=u32:13"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), out) || !strings.Contains(stdout.String(), "Q4_0") {
		t.Errorf("stdout %q should name the output and its types", stdout.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ti, ok := f.Tensor("token_embd.weight"); !ok || ti.Type != ggml.Q8_0 {
		t.Errorf("token_embd = %+v", ti)
	}
	if ti, ok := f.Tensor("blk.0.ffn_up.weight"); !ok || ti.Type != ggml.Q4_0 {
		t.Errorf("ffn_up = %+v", ti)
	}
	if s, _ := f.String("tokenizer.chat_template"); !strings.Contains(s, "m.content") {
		t.Errorf("chat template %q", s)
	}
	if v := f.KV["tokenizer.ggml.eot_token_id"]; v.Type != gguf.Uint32 || v.Data != uint32(13) {
		t.Errorf("eot_token_id %+v, want u32 13", v)
	}

	bad := filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(bad, []byte("{% for m in messages %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-m", in, "-o", out}, 2, "--type"},
		{[]string{"-m", in, "-o", out, "--type", "q4_k"}, 2, "q4_k"},
		{[]string{"-m", in, "-o", out, "--type", "q8_0", "--embed-type", "iq2"}, 2, "iq2"},
		{[]string{"-m", in, "-o", out, "--type", "q8_0", "--override", "k=u32:x"}, 2, "k=u32:x"},
		{[]string{"-m", in, "-o", out, "--type", "q8_0", "--override", "k=u64:1"}, 2, "u64"},
		{[]string{"-m", in, "-o", out, "--type", "q8_0", "--chat-template", bad}, 1, "bad.jinja"},
		{[]string{"-m", in, "-o", out, "--type", "q8_0", "--chat-template", filepath.Join(dir, "none.jinja")}, 1, "none.jinja"},
		{[]string{"-m", filepath.Join(dir, "none.gguf"), "-o", out, "--type", "q8_0"}, 1, "none.gguf"},
		{[]string{"-m", in, "-o", in, "--type", "q8_0"}, 1, "is the input"},
	} {
		stderr.Reset()
		if code := Run(env, append([]string{"quantize"}, c.args...)); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}
