package engine

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/gguf"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/sample"
	"nibble/engine/tokenizer"
	"nibble/internal/testdata"
)

// hfModels are the tiny random-weight models of engine/testdata/hf, each
// with transformers' float32 references for a short prompt and one that
// crosses every sliding window (engine/testdata/hf/README.md says what each
// exercises and how make_refs.py made them).
var hfModels = []struct{ name, arch string }{
	{"tiny-qwen3moe", "qwen3moe"},
	{"tiny-mixtral", "llama"},
	{"tiny-gptoss", "gpt-oss"},
	{"tiny-gemma4", "gemma4"},
	{"tiny-gemma4-moe", "gemma4"},
}

// hfDir is where the models and their references live.
const hfDir = "testdata/hf"

// TestHFFamiliesMatchTransformers is the acceptance bar for the families
// that mixture-of-experts and Gemma 4 brought: with an f16 cache, Nibble's
// last-position logits have cosine ≥ 0.99999 with transformers', the same
// top-10 tokens, and the same 24 greedy tokens (decoded with the cache), for
// both prompts of every model. The references were chosen with wide margins
// (router top-k gaps, greedy and top-10 leads; the README gives them), so no
// close call is excused here.
func TestHFFamiliesMatchTransformers(t *testing.T) {
	for _, hm := range hfModels {
		t.Run(hm.name, func(t *testing.T) {
			path := filepath.Join(hfDir, hm.name+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("fixture missing: %v", err)
			}
			b := cpu.New(2)
			defer b.Close()
			m, err := LoadModel(path, b)
			if err != nil {
				t.Fatalf("%s (arch %s) does not load: %v", hm.name, hm.arch, err)
			}
			defer m.Close()
			if m.HP.Arch != hm.arch {
				t.Fatalf("arch %q, want %q", m.HP.Arch, hm.arch)
			}
			for _, which := range []string{"short", "long"} {
				t.Run(which, func(t *testing.T) {
					ref := readFamilyReference(t, filepath.Join(hfDir, hm.name+".ref"), which, hfDir)
					checkHFReference(t, m, ref)
				})
			}
		})
	}
}

// checkHFReference compares one prompt: identical token ids, then one f16-KV
// prefill of the whole prompt and 24 cached greedy steps.
func checkHFReference(t *testing.T, m *Model, ref *familyReference) {
	t.Helper()
	if ids := m.EncodePrompt(ref.prompt); !slices.Equal(ids, ref.TokenIDs) {
		t.Fatalf("token ids differ from the reference:\n got %v\nwant %v", ids, ref.TokenIDs)
	}
	if len(ref.last) != m.HP.Vocab {
		t.Fatalf("reference has %d logits, the model's vocabulary %d", len(ref.last), m.HP.Vocab)
	}
	n := len(ref.TokenIDs)
	st, err := m.NewState(kv.Config{Type: kv.F16, Ctx: n + len(ref.Greedy) + 1}, n)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logits := make([]float32, m.HP.Vocab)
	if err := st.Forward(ref.TokenIDs, 0, logits); err != nil {
		t.Fatal(err)
	}
	cos := numeric.Cosine(logits, ref.last)
	var wantTop []int32
	for _, e := range ref.Top {
		wantTop = append(wantTop, int32(e[0]))
	}
	gotTop := topIDs(logits, len(wantTop))
	var maxAbs float64
	for i, x := range logits {
		maxAbs = max(maxAbs, math.Abs(float64(x)-float64(ref.last[i])))
	}
	greedy := make([]int32, 0, len(ref.Greedy))
	for i := range ref.Greedy {
		tok := sample.Greedy(logits)
		greedy = append(greedy, tok)
		if i == len(ref.Greedy)-1 {
			break
		}
		if err := st.Forward([]int32{tok}, n+i, logits); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d tokens: f16 KV cos %.8f, max|Δlogit| %.5f, top-10 %v (ordered %v), greedy %d/%d equal",
		n, cos, maxAbs, slices.Equal(sortedIDs(gotTop), sortedIDs(wantTop)), slices.Equal(gotTop, wantTop), commonPrefix(greedy, ref.Greedy), len(ref.Greedy))
	if !(cos >= 0.99999) {
		t.Errorf("f16 KV: last-position cosine %.8f < 0.99999", cos)
	}
	if !slices.Equal(sortedIDs(gotTop), sortedIDs(wantTop)) {
		t.Errorf("f16 KV: top-%d ids %v, want %v", len(wantTop), gotTop, wantTop)
	}
	if !slices.Equal(greedy, ref.Greedy) {
		t.Errorf("f16 KV: greedy tokens leave the reference after %d of %d:\n got %v\nwant %v",
			commonPrefix(greedy, ref.Greedy), len(ref.Greedy), greedy, ref.Greedy)
	}
}

func sortedIDs(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// The fixtures' vocabulary: the first tokens of the GPT-2 BPE vocabulary with
// the merges among them, and the special tokens the families' templates name
// (all control tokens except Qwen3's think tags, which are user-defined as in
// Qwen3's own files). 2048 tokens in all keep the embedding tables small.
const hfVocabSize = 2048

var hfSpecialTokens = []string{
	"<|endoftext|>", "<|startoftext|>", // GPT-2, gpt-oss
	"<|im_start|>", "<|im_end|>", "<think>", "</think>", // Qwen3
	"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>", // gpt-oss harmony
	"<bos>", "<eos>", "<pad>", "<|turn>", "<turn|>", // Gemma 4
}

// hfShortPrompt and the first hundred-odd tokens of the shared long prompt
// (more than every sliding window of the fixtures) are the reference prompts.
const hfShortPrompt = "The capital of France is"

var hfVocabOut = flag.String("hf-vocab", "", "write the HF fixtures' vocabulary and prompt token ids to `DIR`/vocab.json (input of testdata/hf/make_refs.py)")

// TestHFWriteVocab writes, with -hf-vocab, the vocabulary that make_refs.py
// puts in every fixture and the prompts' token ids under it, with and
// without BOS, computed by Nibble's tokenizer.
func TestHFWriteVocab(t *testing.T) {
	if *hfVocabOut == "" {
		t.Skip("only with -hf-vocab DIR")
	}
	td := testdata.Dir(t)
	f, err := gguf.Open(filepath.Join(td, "tokenizer", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, err := tokenizer.VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	nBase := hfVocabSize - len(hfSpecialTokens)
	v := &tokenizer.Vocab{Model: "gpt2", Pre: "gpt-2", Tokens: slices.Clone(src.Tokens[:nBase]), SpecialIDs: map[string]uint64{}}
	for range nBase {
		v.Types = append(v.Types, tokenizer.TypeNormal)
	}
	known := map[string]bool{}
	for _, tok := range v.Tokens {
		known[tok] = true
	}
	for _, mg := range src.Merges {
		l, r, ok := strings.Cut(mg, " ")
		if ok && known[l] && known[r] && known[l+r] {
			v.Merges = append(v.Merges, mg)
		}
	}
	for _, s := range hfSpecialTokens {
		v.Tokens = append(v.Tokens, s)
		typ := tokenizer.TypeControl
		if s == "<think>" || s == "</think>" {
			typ = tokenizer.TypeUserDefined
		}
		v.Types = append(v.Types, typ)
	}
	id := func(s string) uint64 { return uint64(slices.Index(v.Tokens, s)) }
	long, err := os.ReadFile(filepath.Join(td, "long_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	words := strings.SplitAfter(string(long), " ")
	encode := func(text string, bos bool) []int32 {
		vv := *v
		vv.SpecialIDs = map[string]uint64{"bos": id("<bos>"), "eos": id("<eos>")}
		vv.AddBOS = &bos
		tk, err := tokenizer.New(&vv)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Encode(text, true, false)
	}
	var longText string
	for _, w := range words {
		longText += w
		if len(encode(longText, false)) >= 100 {
			break
		}
	}
	longText = strings.TrimRight(longText, " ")
	out := map[string]any{
		"tokens": v.Tokens, "token_type": v.Types, "merges": v.Merges, "model": v.Model, "pre": v.Pre,
		"prompts": map[string]any{
			"short": map[string]any{"prompt": hfShortPrompt, "ids": encode(hfShortPrompt, false), "ids_bos": encode(hfShortPrompt, true)},
			"long":  map[string]any{"prompt": longText, "ids": encode(longText, false), "ids_bos": encode(longText, true)},
		},
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*hfVocabOut, "vocab.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tokens, %d merges; short %d ids, long %d ids (%d bytes)", len(v.Tokens), len(v.Merges),
		len(encode(hfShortPrompt, false)), len(encode(longText, false)), len(longText))
}
