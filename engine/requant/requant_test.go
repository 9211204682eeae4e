package requant_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/numeric"
	"nibble/engine/requant"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// f16Model writes a small F16 Llama with the built-in vocabulary.
func f16Model(t *testing.T, untied bool) string {
	t.Helper()
	o := synth.DefaultOptions("llama")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 4, 2, 256
	o.Seed, o.VocabData, o.TiedOutput = 3, vocab.LlamaSPM, !untied
	path := filepath.Join(t.TempDir(), "f16.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// lastLogits prefills the same prompt on the model at path and returns the
// logits after its last token.
func lastLogits(t *testing.T, path string) []float32 {
	t.Helper()
	return logitsAfter(t, path, "The access code for Camila Mack is")
}

func logitsAfter(t *testing.T, path, prompt string) []float32 {
	t.Helper()
	b := cpu.New(2)
	defer b.Close()
	m, err := engine.LoadModel(path, b)
	if err != nil {
		t.Fatalf("load %s: %v", filepath.Base(path), err)
	}
	defer m.Close()
	s, err := engine.NewSession(m, b, engine.Options{Ctx: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill(context.Background(), m.EncodePrompt(prompt)); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), s.Logits()...)
}

// A quantized model loads and its logits stay close to the F16 model's
// (random weights are noise to a quantizer, so the bounds are loose here
// and tight on the trained model below); norms stay F32 and the metadata is copied,
// with the file type and the values asked for set.
func TestRoundTripLogits(t *testing.T) {
	src := f16Model(t, false)
	ref := lastLogits(t, src)
	for _, c := range []struct {
		typ    ggml.Type
		minCos float64
	}{{ggml.F16, 0.999999}, {ggml.Q8_0, 0.998}, {ggml.Q4_0, 0.85}} {
		t.Run(c.typ.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.gguf")
			sum, err := requant.File(src, out, requant.Options{Type: c.typ,
				Set: map[string]any{"tokenizer.chat_template": "{{ messages[0].content }}", "tokenizer.ggml.eot_token_id": uint32(13)}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Tensors == 0 || sum.ByType[c.typ] == 0 || len(sum.Kept) != 0 {
				t.Fatalf("summary %+v", sum)
			}
			cos := numeric.Cosine(ref, lastLogits(t, out))
			t.Logf("%s: logits cosine to f16 %.7f", c.typ, cos)
			if cos < c.minCos {
				t.Fatalf("%s: logits cosine to f16 %.7f, want ≥ %g", c.typ, cos, c.minCos)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, ti := range f.Tensors {
				want := c.typ
				if len(ti.Dims) < 2 {
					want = ggml.F32
				}
				if ti.Type != want {
					t.Errorf("tensor %s is %s, want %s", ti.Name, ti.Type, want)
				}
			}
			if tpl, _ := f.String("tokenizer.chat_template"); tpl != "{{ messages[0].content }}" {
				t.Errorf("chat template %q", tpl)
			}
			if eot, _ := f.Uint("tokenizer.ggml.eot_token_id"); eot != 13 {
				t.Errorf("eot_token_id %d", eot)
			}
			if n, _ := f.ArrayLen("tokenizer.ggml.tokens"); n != 32000 {
				t.Errorf("tokenizer.ggml.tokens has %d entries, want the 32000 copied", n)
			}
		})
	}
}

// A changed model is a different model: the quantized logits are not
// trivially equal to the F16 ones (the test above could not fail
// otherwise), and a coarser type is further away.
func TestCoarserTypeIsFurther(t *testing.T) {
	src := f16Model(t, false)
	ref := lastLogits(t, src)
	cos := map[ggml.Type]float64{}
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.Q4_0} {
		out := filepath.Join(t.TempDir(), typ.String()+".gguf")
		if _, err := requant.File(src, out, requant.Options{Type: typ}); err != nil {
			t.Fatal(err)
		}
		cos[typ] = numeric.Cosine(ref, lastLogits(t, out))
	}
	if !(cos[ggml.Q4_0] < cos[ggml.Q8_0] && cos[ggml.Q8_0] < 1) {
		t.Fatalf("cosines to f16: q8_0 %.7f, q4_0 %.7f: want q4_0 < q8_0 < 1", cos[ggml.Q8_0], cos[ggml.Q4_0])
	}
}

// EmbedType keeps the token embedding and an untied output apart from the
// other weights.
func TestEmbedType(t *testing.T) {
	src := f16Model(t, true)
	out := filepath.Join(t.TempDir(), "out.gguf")
	if _, err := requant.File(src, out, requant.Options{Type: ggml.Q4_0, EmbedType: ggml.Q8_0, EmbedTypeSet: true}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string]ggml.Type{"token_embd.weight": ggml.Q8_0, "output.weight": ggml.Q8_0,
		"blk.0.attn_q.weight": ggml.Q4_0, "blk.0.attn_norm.weight": ggml.F32} {
		ti, ok := f.Tensor(name)
		if !ok || ti.Type != want {
			t.Errorf("%s: %v (present %v), want %s", name, ti, ok, want)
		}
	}
	if ft, _ := f.Uint("general.file_type"); ft != 2 {
		t.Errorf("general.file_type %d, want 2 (mostly Q4_0)", ft)
	}
}

func TestBadInput(t *testing.T) {
	src := f16Model(t, false)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("not a model at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		in, out  string
		o        requant.Options
		contains string
	}{
		{"unsupported type", src, filepath.Join(dir, "a.gguf"), requant.Options{Type: ggml.Q4_K}, "unsupported type"},
		{"unsupported embed type", src, filepath.Join(dir, "a.gguf"), requant.Options{Type: ggml.Q8_0, EmbedType: ggml.Q6_K, EmbedTypeSet: true}, "unsupported type"},
		{"output is input", src, src, requant.Options{Type: ggml.Q8_0}, "is the input"},
		{"missing input", filepath.Join(dir, "none.gguf"), filepath.Join(dir, "a.gguf"), requant.Options{Type: ggml.Q8_0}, "none.gguf"},
		{"not a GGUF file", junk, filepath.Join(dir, "a.gguf"), requant.Options{Type: ggml.Q8_0}, "junk.gguf"},
		{"output folder missing", src, filepath.Join(dir, "no", "such", "a.gguf"), requant.Options{Type: ggml.Q8_0}, "a.gguf"},
		{"bad metadata value", src, filepath.Join(dir, "a.gguf"), requant.Options{Type: ggml.Q8_0, Set: map[string]any{"x": 3}}, `"x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := requant.File(c.in, c.out, c.o)
			if err == nil || !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("err %v, want one that mentions %q", err, c.contains)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "a.gguf")); !os.IsNotExist(err) {
		t.Fatalf("a failed run left an output file: %v", err)
	}
}

func TestParseType(t *testing.T) {
	for s, want := range map[string]ggml.Type{"q4_0": ggml.Q4_0, "Q8_0": ggml.Q8_0, "f16": ggml.F16, "bf16": ggml.BF16} {
		if got, err := requant.ParseType(s); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "q4_k", "q5", "int8"} {
		if _, err := requant.ParseType(s); err == nil {
			t.Errorf("ParseType(%q) accepted it", s)
		}
	}
}

// On the trained document Q&A model the quantized logits after a document
// question stay very close to F16's and pick the same answer token.
func TestTrainedModelLogits(t *testing.T) {
	src := filepath.Join(testdata.Dir(t), "trained", "nibble-docqa-29m-f16.gguf")
	prompt := "Document:\nThe studio opens at eight. The access code for Camila Mack is 6265-96. " +
		"The access code for Camila Griffin is 6260-69. Bicycles go in the yard.\n" +
		"Question: What is the access code for Camila Mack?\nAnswer: 62"
	ref := logitsAfter(t, src, prompt)
	for typ, minCos := range map[ggml.Type]float64{ggml.Q8_0: 0.9999, ggml.Q4_0: 0.995} {
		out := filepath.Join(t.TempDir(), typ.String()+".gguf")
		if _, err := requant.File(src, out, requant.Options{Type: typ}); err != nil {
			t.Fatal(err)
		}
		got := logitsAfter(t, out, prompt)
		cos := numeric.Cosine(ref, got)
		t.Logf("%s: cosine %.7f", typ, cos)
		if cos < minCos || argmax(got) != argmax(ref) {
			t.Errorf("%s: cosine %.7f (want ≥ %g), top token %d (f16: %d)", typ, cos, minCos, argmax(got), argmax(ref))
		}
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// --type mxfp4 is llama.cpp's MXFP4_MOE: the experts' 3-D weights MXFP4,
// the other weights (embedding included) Q8_0, routers, sinks, biases and
// norms F32 as they were; the model runs and stays close to the original.
func TestRequantMXFP4Experts(t *testing.T) {
	o := synth.DefaultOptions(synth.GptOss)
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.ExpertFF = 2, 128, 4, 2, 128, 64
	o.Type, o.ExpertType, o.Seed, o.VocabData = ggml.F16, ggml.F16, 3, vocab.LlamaSPM
	src := filepath.Join(t.TempDir(), "gptoss-f16.gguf")
	if err := synth.Generate(src, o); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "gptoss-mxfp4.gguf")
	if _, err := requant.File(src, out, requant.Options{Type: ggml.MXFP4}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]ggml.Type{
		"blk.0.ffn_gate_exps.weight": ggml.MXFP4, "blk.1.ffn_down_exps.weight": ggml.MXFP4,
		"blk.0.attn_q.weight": ggml.Q8_0, "token_embd.weight": ggml.Q8_0, "output.weight": ggml.Q8_0,
		"blk.0.ffn_gate_inp.weight": ggml.F32, "blk.0.attn_sinks.weight": ggml.F32, "blk.0.ffn_up_exps.bias": ggml.F32,
	} {
		if ti, ok := f.Tensor(name); !ok || ti.Type != want {
			t.Errorf("%s: %+v, want %s", name, ti, want)
		}
	}
	if ft, _ := f.Uint("general.file_type"); ft != 38 {
		t.Errorf("general.file_type %d, want 38 (MXFP4_MOE)", ft)
	}
	f.Close()
	if cos := numeric.Cosine(lastLogits(t, out), lastLogits(t, src)); !(cos > 0.9 && cos < 1) {
		t.Fatalf("cosine to the F16 original %.6f, want in (0.9, 1)", cos)
	}
}
