package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

func boolPtr(b bool) *bool { return &b }

// tinySPM: a hand-made SentencePiece vocabulary with byte fallback.
func tinySPM() *Vocab {
	v := &Vocab{Model: "llama"}
	add := func(s string, score float32, typ int32) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, TypeUnknown)
	add("<s>", 0, TypeControl)
	add("</s>", 0, TypeControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, TypeByte)
	}
	add("▁", -1, TypeNormal)   // 259
	add("a", -2, TypeNormal)   // 260
	add("b", -2, TypeNormal)   // 261
	add("▁a", -3, TypeNormal)  // 262
	add("ab", -1, TypeNormal)  // 263: scores higher than ▁a
	add("▁ab", -4, TypeNormal) // 264
	return v
}

func TestTinySPM(t *testing.T) {
	tk, err := New(tinySPM())
	if err != nil {
		t.Fatal(err)
	}
	// "▁ab": ab (score -1) merges before ▁a (-3), then ▁ + ab = ▁ab.
	if got := tk.Encode("ab", false, false); !equalIDs(got, []int32{264}) {
		t.Errorf("ab: %v", got)
	}
	// "ba": no merge, b a stay separate; c falls back to its byte token.
	if got := tk.Encode("bac", true, false); !equalIDs(got, []int32{1, 259, 261, 260, 3 + 'c'}) {
		t.Errorf("bac: %v", got)
	}
	if got := tk.Decode(tk.Encode("bac ab", false, false)); got != "bac ab" {
		t.Errorf("round trip: %q", got)
	}
	v := tinySPM()
	v.AddSpacePrefix = boolPtr(false)
	v.AddEOS = boolPtr(true)
	tk, err = New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("ab", true, false); !equalIDs(got, []int32{1, 263, 2}) {
		t.Errorf("no space prefix, with EOS: %v", got)
	}
}

// tinyBPE: byte-level BPE over the 256 GPT-2 alphabet characters plus merges.
func tinyBPE(merges ...string) *Vocab {
	v := &Vocab{Model: "gpt2", Pre: "gpt-2", Merges: merges}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, byteToUTF8[b])
	}
	for _, m := range merges {
		v.Tokens = append(v.Tokens, strings.Replace(m, " ", "", 1))
	}
	v.Tokens = append(v.Tokens, "<|endoftext|>")
	v.Types = make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	v.Types[len(v.Types)-1] = TypeControl
	v.SpecialIDs = map[string]uint64{"eos": uint64(len(v.Tokens) - 1), "bos": uint64(len(v.Tokens) - 1)}
	return v
}

func TestTinyBPE(t *testing.T) {
	// Rank order decides: "b c" (rank 0) before "a b" (rank 1), so "abc" -> a + bc.
	tk, err := New(tinyBPE("b c", "a b", "Ġ a"))
	if err != nil {
		t.Fatal(err)
	}
	bc, ab, sp := int32(256), int32(257), int32(258)
	if got := tk.Encode("abc", false, false); !equalIDs(got, []int32{'a', bc}) {
		t.Errorf("abc: %v", got)
	}
	if got := tk.Encode("ab", false, false); !equalIDs(got, []int32{ab}) {
		t.Errorf("ab: %v", got)
	}
	// gpt-2 splits " abc" into one word; the space is Ġ (byte 0x20 -> U+0120).
	if got := tk.Encode(" abc", false, false); !equalIDs(got, []int32{sp, bc}) {
		t.Errorf("' abc': %v", got)
	}
	if got := tk.Encode("x<|endoftext|>", false, true); !equalIDs(got, []int32{'x', 259}) {
		t.Errorf("special: %v", got)
	}
	if !tk.IsEOG(259) || tk.AddBOS() {
		t.Error("EOS must end generation; gpt-2 adds no BOS")
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(v *Vocab)
		want string
	}{
		{"no model", func(v *Vocab) { v.Model = "" }, "missing tokenizer.ggml.model"},
		{"unknown model", func(v *Vocab) { v.Model = "t5" }, "unsupported tokenizer model"},
		{"no tokens", func(v *Vocab) { v.Tokens = nil }, "empty"},
		{"duplicate", func(v *Vocab) { v.Tokens[260] = "b" }, "duplicate token"},
		{"short scores", func(v *Vocab) { v.Scores = v.Scores[:10] }, "scores has 10 entries"},
		{"short types", func(v *Vocab) { v.Types = v.Types[:10] }, "token_type has 10 entries"},
		{"bos needed", func(v *Vocab) {
			v.SpecialIDs = map[string]uint64{"bos": 1 << 40}
			v.Tokens = v.Tokens[:1]
			v.Scores = v.Scores[:1]
			v.Types = v.Types[:1]
		}, "bos_token_id is not set"},
	}
	for _, c := range cases {
		v := tinySPM()
		c.edit(v)
		if _, err := New(v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	v := tinyBPE("a b")
	v.Merges = nil
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), "merges") {
		t.Errorf("bpe without merges: %v", err)
	}
	v = tinyBPE("a b")
	v.Pre = "kimi-k2"
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), "unsupported pre-tokenizer") {
		t.Errorf("unsupported pre: %v", err)
	}
	// Out-of-range special ids from the file are ignored, like llama.cpp.
	v = tinyBPE("a b")
	v.SpecialIDs["eot"] = 1 << 20
	tk, err := New(v)
	if err != nil || tk.EOT() != 257 { // falls back to detecting <|endoftext|> by text
		t.Errorf("bad eot id: err %v, EOT %d", err, tk.EOT())
	}
}

// Every pre-tokenizer in the table compiles, and splitting never loses text.
func TestPreTokenizersCompile(t *testing.T) {
	texts := []string{"", "Hello, y'all! 1234567 ½ 東京 \t\n\r\n  x", "  \u00a0\u3000 ", "🦙.cpp 'S 'LL"}
	for name, spec := range preTokenizers {
		pt, err := compilePreTokenizer(spec)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, s := range texts {
			cpts := decodeCodepoints(s, nil)
			total := 0
			for _, n := range pt.split(cpts) {
				if n <= 0 {
					t.Errorf("%s: empty piece for %q", name, s)
				}
				total += n
			}
			if total != len(cpts) {
				t.Errorf("%s: pieces cover %d of %d codepoints of %q", name, total, len(cpts), s)
			}
		}
	}
}
