package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// FuzzEncode feeds arbitrary text to every fixture vocabulary: Encode must not
// panic, must return ids inside the vocabulary, must round-trip through Decode
// wherever the tokenizer is lossless, and the stream decoder must emit valid
// UTF-8 that matches Decode.
func FuzzEncode(f *testing.F) {
	fixtures := loadFixtures(f)
	var toks []*Tokenizer
	for _, fx := range fixtures {
		toks = append(toks, loadGGUF(f, fx.gguf))
		for _, s := range fx.inputs {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return // keep each run fast; long inputs add nothing new
		}
		for i, tk := range toks {
			for _, parse := range []bool{false, true} {
				ids := tk.Encode(s, parse, parse)
				for _, id := range ids {
					if id < 0 || int(id) >= tk.VocabSize() {
						t.Fatalf("%s: id %d out of range for %q", fixtures[i].name, id, s)
					}
				}
				dec := tk.Decode(ids)
				if !parse {
					if ok, _ := lossless(tk, s); ok && dec != s {
						t.Fatalf("%s: round trip %q -> %v -> %q", fixtures[i].name, s, ids, dec)
					}
				}
				d := tk.NewStreamDecoder()
				var out []byte
				for _, id := range ids {
					chunk := d.Push(id)
					if !utf8.ValidString(chunk) {
						t.Fatalf("%s: invalid UTF-8 chunk %q", fixtures[i].name, chunk)
					}
					out = append(out, chunk...)
				}
				out = append(out, d.Flush()...)
				if want := string([]rune(dec)); string(out) != want {
					t.Fatalf("%s: stream %q != decode %q", fixtures[i].name, out, want)
				}
			}
		}
	})
}
