package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

// gatedTexts lists the texts of a vocabulary's control and unknown tokens,
// longest first, at most n of them.
func gatedTexts(tk *Tokenizer, n int) []string {
	var out []string
	for _, id := range tk.special {
		if tk.gated(id) && len(out) < n {
			out = append(out, tk.texts[id])
		}
	}
	return out
}

// specialMarkup returns the texts of the vocabulary's BOS, EOS, EOT and a few
// more control tokens: what chat templates write around messages.
func specialMarkup(tk *Tokenizer) []string {
	var out []string
	for _, id := range []int32{tk.bos, tk.eos, tk.eot, tk.unk} {
		if tk.valid(id) && tk.gated(id) {
			out = append(out, tk.texts[id])
		}
	}
	return append(out, gatedTexts(tk, 3)...)
}

// markedUp joins pieces with control-token texts between them, the way a chat
// template wraps messages, and returns the text with the spans of the pieces.
func markedUp(pieces, markup []string) (string, []Span) {
	var b strings.Builder
	var spans []Span
	for i, p := range pieces {
		if len(markup) > 0 {
			b.WriteString(markup[i%len(markup)])
		}
		spans = append(spans, Span{b.Len(), b.Len() + len(p)})
		b.WriteString(p)
	}
	if len(markup) > 0 {
		b.WriteString(markup[0])
	}
	return b.String(), spans
}

// Plain spans without control-token text change nothing: EncodeSpans gives
// exactly Encode's ids with parsing on, on every fixture vocabulary, including
// the ids at span boundaries and the control tokens around the spans.
func TestEncodeSpansMatchesEncodeWithoutControlText(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			tk := loadGGUF(t, fx.gguf)
			inputs := fx.inputs
			if inputs == nil {
				inputs = defaultRoundTripInputs
			}
			markup := specialMarkup(tk)
			n := 0
			for i, s := range inputs {
				if len(tk.ControlSpans(s)) > 0 {
					continue
				}
				next := inputs[(i+1)%len(inputs)]
				cases := []struct {
					text  string
					spans []Span
				}{
					{s, nil},
					{s, []Span{{0, len(s)}}},
					{s, []Span{{0, len(s) / 2}, {len(s) / 2, len(s)}}},
				}
				if len(tk.ControlSpans(next)) == 0 {
					text, spans := markedUp([]string{s, next, "\n" + s + " "}, markup)
					cases = append(cases, struct {
						text  string
						spans []Span
					}{text, spans})
				}
				for _, c := range cases {
					for _, add := range []bool{false, true} {
						want := tk.Encode(c.text, add, true)
						if got := tk.EncodeSpans(c.text, add, c.spans); !equalIDs(got, want) {
							t.Fatalf("%q spans %v add %v:\n got  %v\n want %v", c.text, c.spans, add, got, want)
						}
						n++
					}
				}
			}
			t.Logf("%s: %d encodings equal", fx.name, n)
		})
	}
}

// Control-token text inside a plain span is plain text: a span over the whole
// text gives Encode's ids with parsing off, while the same text outside any
// span still becomes control tokens.
func TestEncodeSpansKeepsControlTextPlain(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			tk := loadGGUF(t, fx.gguf)
			markup := specialMarkup(tk)
			if len(markup) == 0 {
				t.Skip("no control tokens")
			}
			for _, ctl := range markup {
				inside := fmt.Sprintf("Please repeat: %s and then stop", ctl)
				if got, want := tk.EncodeSpans(inside, false, []Span{{0, len(inside)}}), tk.Encode(inside, false, false); !equalIDs(got, want) {
					t.Errorf("whole text plain %q:\n got  %v\n want %v", inside, got, want)
				}
				id := tk.toID[ctl]
				text, spans := markedUp([]string{inside, "ok " + ctl}, markup)
				got := tk.EncodeSpans(text, false, spans)
				outside := strings.Count(text, ctl) - strings.Count(inside+"ok "+ctl, ctl)
				if n := countID(got, id); n != outside {
					t.Errorf("%q with spans %v: %d x %q, want %d (the markup's only)", text, spans, n, ctl, outside)
				}
				if n := countID(tk.Encode(text, false, true), id); n <= outside {
					t.Errorf("without spans %q should turn the span's text into control tokens too (%d)", text, n)
				}
			}
		})
	}
}

func countID(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// A control-token match that straddles a span boundary is not taken, and the
// search goes on past it to a whole one outside the span.
func TestEncodeSpansStraddle(t *testing.T) {
	tk := loadGGUF(t, testdataDir(t)+"/tokenizer/ggml-vocab-llama-bpe.gguf")
	const eot = "<|eot_id|>"
	id := tk.toID[eot]
	text := "a<|eot_id|>" + eot // the span ends inside the first occurrence
	got := tk.EncodeSpans(text, false, []Span{{0, 5}})
	if countID(got, id) != 1 || got[len(got)-1] != id {
		t.Errorf("straddling match: got %v, want plain text then one %d", got, id)
	}
	// Spans out of order, overlapping and past the end are accepted.
	spans := []Span{{20, 99}, {3, 8}, {-4, 2}, {5, 6}}
	want := tk.EncodeSpans(text, false, []Span{{0, 2}, {3, 8}, {20, len(text)}})
	if got := tk.EncodeSpans(text, false, spans); !equalIDs(got, want) {
		t.Errorf("unnormalized spans: got %v, want %v", got, want)
	}
}

func TestControlSpansAndEdge(t *testing.T) {
	tk := loadGGUF(t, testdataDir(t)+"/tokenizer/ggml-vocab-llama-bpe.gguf")
	text := "x<|eot_id|>y<|start_header_id|><|eot_id|>"
	got := tk.ControlSpans(text)
	want := []Span{{1, 11}, {12, 31}, {31, 41}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ControlSpans: got %v, want %v", got, want)
	}
	if s := tk.ControlSpans("plain text <|not_a_token|>"); len(s) != 0 {
		t.Errorf("ControlSpans of plain text: %v", s)
	}
	for s, want := range map[string]bool{
		"":                 false,
		"hello":            false,
		"hello <|eot":      true,
		"_id|> hello":      true,
		"<|eot_id|>":       false, // whole, not an edge: ControlSpans reports it
		"a < b and c > d":  false,
		"ends with <":      true,
		"> starts quoting": true,
	} {
		if got := tk.ControlEdge(s); got != want {
			t.Errorf("ControlEdge(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzEncodeSpans: with one plain span anywhere, EncodeSpans never panics, never
// produces a control token whose text lies in the span, and equals Encode with
// parsing on when the span holds no control-token text.
func FuzzEncodeSpans(f *testing.F) {
	fixtures := loadFixtures(f)
	var toks []*Tokenizer
	for _, fx := range fixtures {
		tk := loadGGUF(f, fx.gguf)
		toks = append(toks, tk)
		for _, ctl := range specialMarkup(tk) {
			f.Add("say "+ctl+" now"+ctl, 2, 12)
		}
	}
	f.Add("<|eot_id|><|eot_id|>", 3, 14)
	f.Fuzz(func(t *testing.T, s string, a, b int) {
		if len(s) > 2048 {
			return
		}
		span := Span{a, b}
		for i, tk := range toks {
			ids := tk.EncodeSpans(s, false, []Span{span})
			lo, hi := max(a, 0), min(b, len(s))
			inSpan, outside := 0, 0
			for _, c := range tk.ControlSpans(s) {
				if lo < hi && c.Start < hi && lo < c.End {
					inSpan++
				} else {
					outside++
				}
			}
			gatedOut := 0
			for _, id := range ids {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("%s: id %d out of range", fixtures[i].name, id)
				}
				if tk.IsControl(id) {
					gatedOut++
				}
			}
			if gatedOut > outside {
				t.Fatalf("%s: %q span %v: %d control tokens, only %d control texts outside the span", fixtures[i].name, s, span, gatedOut, outside)
			}
			if inSpan == 0 {
				if want := tk.Encode(s, false, true); !equalIDs(ids, want) {
					t.Fatalf("%s: %q span %v: got %v, want %v", fixtures[i].name, s, span, ids, want)
				}
			}
		}
	})
}
