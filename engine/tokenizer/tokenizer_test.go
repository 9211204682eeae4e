package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
)

func vocabTokenizer(t *testing.T, name string) *Tokenizer {
	t.Helper()
	return loadGGUF(t, filepath.Join(testdataDir(t), "tokenizer", "ggml-vocab-"+name+".gguf"))
}

func TestSpecialTokens(t *testing.T) {
	cases := []struct {
		vocab          string
		bos, eos, eot  int32
		addBOS, addEOS bool
		eog            []int32
		notEOG         []int32
		model, pre     string
	}{
		{"llama-spm", 1, 2, -1, true, false, []int32{2}, []int32{1, 0, 13}, "llama", "default"},
		{"phi-3", 1, 32000, 32007, true, false, []int32{32000, 32007, 2}, []int32{1, 32001}, "llama", "default"},
		{"llama-bpe", 128000, 128001, 128009, true, false, []int32{128001, 128009}, []int32{128000, 128006}, "gpt2", "llama-bpe"},
		{"gpt-2", 50256, 50256, 50256, false, false, []int32{50256}, []int32{0}, "gpt2", "gpt-2"},
		{"gpt-neox", 0, 0, 0, false, false, []int32{0}, []int32{1}, "gpt2", "default"},
		{"deepseek-llm", 100000, 100001, 100001, true, false, []int32{100001}, []int32{100000}, "gpt2", "deepseek-llm"},
	}
	for _, c := range cases {
		tk := vocabTokenizer(t, c.vocab)
		if tk.BOS() != c.bos || tk.EOS() != c.eos || tk.EOT() != c.eot {
			t.Errorf("%s: BOS/EOS/EOT = %d/%d/%d, want %d/%d/%d", c.vocab, tk.BOS(), tk.EOS(), tk.EOT(), c.bos, c.eos, c.eot)
		}
		if tk.AddBOS() != c.addBOS || tk.AddEOS() != c.addEOS {
			t.Errorf("%s: AddBOS/AddEOS = %v/%v, want %v/%v", c.vocab, tk.AddBOS(), tk.AddEOS(), c.addBOS, c.addEOS)
		}
		for _, id := range c.eog {
			if !tk.IsEOG(id) {
				t.Errorf("%s: %d (%q) should end generation", c.vocab, id, tk.TokenText(id))
			}
		}
		for _, id := range c.notEOG {
			if tk.IsEOG(id) {
				t.Errorf("%s: %d (%q) should not end generation", c.vocab, id, tk.TokenText(id))
			}
		}
		if tk.Model() != c.model || tk.Pre() != c.pre {
			t.Errorf("%s: model/pre = %q/%q, want %q/%q", c.vocab, tk.Model(), tk.Pre(), c.model, c.pre)
		}
	}
}

func TestAddSpecial(t *testing.T) {
	spm := vocabTokenizer(t, "llama-spm")
	if got := spm.Encode("", true, false); !equalIDs(got, []int32{1}) {
		t.Errorf("spm empty with BOS: %v", got)
	}
	if got := spm.Encode("Hello", true, false); !equalIDs(got, []int32{1, 15043}) {
		t.Errorf("spm Hello with BOS: %v", got)
	}
	if got := vocabTokenizer(t, "gpt-2").Encode("", true, false); len(got) != 0 {
		t.Errorf("gpt-2 adds no BOS: %v", got)
	}
	if got := vocabTokenizer(t, "llama-bpe").Encode("Hello", true, false); !equalIDs(got, []int32{128000, 9906}) {
		t.Errorf("llama-bpe Hello with BOS: %v", got)
	}
}

func TestParseSpecial(t *testing.T) {
	tk := vocabTokenizer(t, "llama-bpe")
	text := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
	on := tk.Encode(text, false, true)
	want := []int32{128006, 882, 128007, 271, 13347, 128009}
	if !equalIDs(on, want) {
		t.Errorf("parseSpecial=true: got %v want %v", on, want)
	}
	off := tk.Encode(text, false, false)
	for _, id := range off {
		if tk.IsControl(id) {
			t.Errorf("parseSpecial=false produced control token %d in %v", id, off)
		}
	}
	if tk.Decode(off) != text || tk.Decode(on) != text {
		t.Errorf("decode: %q / %q", tk.Decode(off), tk.Decode(on))
	}

	// SentencePiece: text after a special token gets the space prefix again.
	spm := vocabTokenizer(t, "llama-spm")
	if got := spm.Encode("<s>Hello", false, true); !equalIDs(got, []int32{1, 15043}) {
		t.Errorf("spm <s>Hello parsed: %v", got)
	}
	if got := spm.Encode("<s>", false, false); len(got) < 2 || got[0] == 1 {
		t.Errorf("spm <s> as text should not be BOS: %v", got)
	}
}

// phi-3's "</s>" is user-defined, so it is matched even without parseSpecial,
// and llama.cpp strips the whitespace after it (model name "Phi3").
func TestUserDefinedRStrip(t *testing.T) {
	tk := vocabTokenizer(t, "phi-3")
	got := tk.Encode("a</s>  b", false, false)
	want := append(append(tk.Encode("a", false, false), 2), tk.Encode("b", false, false)...)
	if !equalIDs(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
	if d := tk.Decode(got); d != "a</s> b" {
		t.Errorf("decode %q", d)
	}
}

// deepseek-llm lists some raw characters as user-defined tokens; they are
// always partitioned out before BPE.
func TestUserDefinedRawText(t *testing.T) {
	tk := vocabTokenizer(t, "deepseek-llm")
	id, ok := tk.TokenID("ö")
	if !ok {
		t.Fatal("no ö token")
	}
	got := tk.Encode("schön", false, false)
	found := false
	for _, x := range got {
		found = found || x == id
	}
	if !found || tk.Decode(got) != "schön" {
		t.Errorf("schön -> %v (%q)", got, tk.Decode(got))
	}
}

func TestPiece(t *testing.T) {
	spm := vocabTokenizer(t, "llama-spm")
	bpe := vocabTokenizer(t, "gpt-2")
	cases := []struct {
		tk   *Tokenizer
		id   int32
		want string
	}{
		{spm, 15043, " Hello"},
		{spm, 1, "<s>"},
		{spm, 0, "<unk>"},
		{spm, 3 + 0x41, "A"},    // <0x41>
		{spm, 3 + 0xF0, "\xF0"}, // a lone byte
		{bpe, 995, " world"},
		{bpe, 50256, "<|endoftext|>"},
		{bpe, 198, "\n"},
	}
	for _, c := range cases {
		if got := string(c.tk.Piece(c.id)); got != c.want {
			t.Errorf("%s Piece(%d) = %q, want %q", c.tk.Model(), c.id, got, c.want)
		}
	}
	if spm.Piece(-1) != nil || spm.Piece(int32(spm.VocabSize())) != nil {
		t.Error("out-of-range ids must give nil")
	}
	// Invalid ids render as nothing (the first one still takes the one-space strip).
	if got := spm.Decode([]int32{-5, 15043, 1 << 30}); got != " Hello" {
		t.Errorf("Decode skips invalid ids: %q", got)
	}
}

func TestDecodeLeadingSpace(t *testing.T) {
	spm := vocabTokenizer(t, "llama-spm")
	ids := spm.Encode(" Hello world", true, false)
	if got := spm.Decode(ids); got != "<s>  Hello world" {
		t.Errorf("Decode with BOS: %q", got)
	}
	// As llama.cpp: once BOS is removed, the next piece keeps its space.
	if got := spm.Detokenize(ids, true, false); got != "  Hello world" {
		t.Errorf("Detokenize removing BOS: %q", got)
	}
	if got := spm.Decode(ids[1:]); got != " Hello world" {
		t.Errorf("Decode without BOS: %q", got)
	}
}

func TestDetokenizeCleanSpaces(t *testing.T) {
	tk := vocabTokenizer(t, "gpt-2")
	in := "Hello , world ! it ' s a ' b 're ok ."
	ids := tk.Encode(in, false, false)
	if got := tk.Decode(ids); got != in {
		t.Fatalf("Decode %q", got)
	}
	want := "Hello, world! it's a'b're ok."
	if got := tk.Detokenize(ids, false, true); got != want {
		t.Errorf("Detokenize = %q, want %q", got, want)
	}
	// qwen2-style vocabularies keep the spaces; SentencePiece never cleans.
	if got := vocabTokenizer(t, "deepseek-coder").Detokenize(vocabTokenizer(t, "deepseek-coder").Encode(in, false, false), false, true); got != in {
		t.Errorf("deepseek-coder Detokenize = %q", got)
	}
}

func TestStreamDecoder(t *testing.T) {
	spm := vocabTokenizer(t, "llama-spm")
	ids := spm.Encode("🦙!", false, false) // ▁ then four byte tokens, then !
	d := spm.NewStreamDecoder()
	var chunks []string
	for _, id := range ids {
		chunks = append(chunks, d.Push(id))
	}
	if strings.Join(chunks, "") != "🦙!" || d.Flush() != "" {
		t.Fatalf("chunks %q", chunks)
	}
	for i, c := range chunks[:len(chunks)-2] {
		if c != "" {
			t.Errorf("chunk %d = %q: partial UTF-8 must be held back", i, c)
		}
	}
	byteTok := func(b int) int32 { return int32(3 + b) }
	d = spm.NewStreamDecoder()
	if got := d.Push(byteTok(0xFF)); got != "\uFFFD" {
		t.Errorf("invalid byte: %q", got)
	}
	if got := d.Push(byteTok(0xE2)); got != "" {
		t.Errorf("lead byte: %q", got)
	}
	if got := d.Push(byteTok('A')); got != "\uFFFDA" {
		t.Errorf("broken sequence: %q", got)
	}
	d.Push(byteTok(0xE2))
	d.Push(byteTok(0x82))
	if got := d.Flush(); got != "\uFFFD\uFFFD" {
		t.Errorf("flush: %q", got)
	}
}

// Invalid UTF-8: SentencePiece keeps the bytes (byte fallback); byte-level
// BPE first replaces each bad byte with U+FFFD, as llama.cpp does.
func TestInvalidUTF8(t *testing.T) {
	in := "a\xffb\xc3(\xe2\x82"
	spm := vocabTokenizer(t, "llama-spm")
	if got := spm.Decode(spm.Encode(in, false, false)); got != in {
		t.Errorf("spm: %q", got)
	}
	bpe := vocabTokenizer(t, "llama-bpe")
	if got := bpe.Decode(bpe.Encode(in, false, false)); got != "a\uFFFDb\uFFFD(\uFFFD\uFFFD" {
		t.Errorf("bpe: %q", got)
	}
}

// A Tokenizer is shared by concurrent requests.
func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama-spm", "deepseek-llm"} {
		tk := vocabTokenizer(t, name)
		text := "Hello, y'all! 1234 ½ 東京 🦙 <|eot_id|> </s> \n\n end"
		want := tk.Encode(text, true, true)
		done := make(chan []int32)
		for g := 0; g < 4; g++ {
			go func() {
				var got []int32
				for i := 0; i < 20; i++ {
					got = tk.Encode(text, true, true)
				}
				done <- got
			}()
		}
		for g := 0; g < 4; g++ {
			if got := <-done; !equalIDs(got, want) {
				t.Errorf("%s: concurrent result %v != %v", name, got, want)
			}
		}
	}
}
