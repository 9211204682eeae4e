package tokenizer

import (
	"fmt"
	"testing"
)

// tinyGemma4 is a SentencePiece-style BPE vocabulary (tokenizer model
// gemma4): control tokens, the 256 <0xXX> byte tokens, characters, ▁ and the
// merged pieces of merges, and "\n" and "\n\n" as tokens.
func tinyGemma4(merges ...string) (*Vocab, map[string]int32) {
	v := &Vocab{Model: "gemma4", Merges: merges}
	add := func(text string, typ int32) {
		v.Tokens, v.Types = append(v.Tokens, text), append(v.Types, typ)
	}
	add("<pad>", TypeControl)
	add("<eos>", TypeControl)
	add("<bos>", TypeControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), TypeByte)
	}
	for _, s := range []string{"▁", "h", "e", "l", "o", "w", "r", "d", "\n", "\n\n"} {
		add(s, TypeNormal)
	}
	for _, m := range merges {
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				add(m[:i]+m[i+1:], TypeNormal)
				break
			}
		}
	}
	yes := true
	v.AddBOS = &yes
	v.SpecialIDs = map[string]uint64{"bos": 2, "eos": 1, "padding": 0}
	ids := map[string]int32{}
	for i, s := range v.Tokens {
		ids[s] = int32(i)
	}
	return v, ids
}

// As llama.cpp's gemma4 tokenizer: spaces become ▁ and merge with what
// follows, merges run over characters by rank, a run of newlines that is a
// token stays whole (one that is not splits into characters), a character
// without a token becomes its UTF-8 bytes' <0xXX> tokens, BOS is added; and
// decoding gives the text back.
func TestGemma4Tokenizer(t *testing.T) {
	v, id := tinyGemma4("h e", "l l", "he ll", "hell o", "▁ w", "▁w o", "r l", "▁wo rl", "▁worl d")
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		{"hello world", []string{"<bos>", "hello", "▁world"}},
		{"hello\n\nworld", []string{"<bos>", "hello", "\n\n", "w", "o", "rl", "d"}},
		{"he\n\n\nd", []string{"<bos>", "he", "\n", "\n", "\n", "d"}},
		{"hé", []string{"<bos>", "h", "<0xC3>", "<0xA9>"}},
	} {
		got := tk.Encode(c.text, true, false)
		want := make([]int32, len(c.want))
		for i, s := range c.want {
			var ok bool
			if want[i], ok = id[s]; !ok {
				t.Fatalf("no token %q", s)
			}
		}
		if !equalIDs(got, want) {
			t.Errorf("%q: %v, want %v (%q)", c.text, got, want, c.want)
		}
		if back := tk.Decode(got[1:]); back != c.text {
			t.Errorf("%q decodes to %q", c.text, back)
		}
	}
}
