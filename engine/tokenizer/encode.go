package tokenizer

import (
	"sort"
	"strings"
)

// fragment is either a run of raw text or an already-decided token.
type fragment struct {
	token  int32 // -1 for raw text
	offset int
	length int
}

// MaxEncodeBytes is the longest text Encode accepts; longer input yields nil
// (symbol offsets are 32-bit).
const MaxEncodeBytes = 1 << 30

// Encode tokenizes text as llama_tokenize does. addSpecial adds BOS/EOS as the
// vocabulary asks (AddBOS/AddEOS); parseSpecial lets the text of control tokens
// become those tokens. User-defined tokens are always matched.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.encode(text, addSpecial, parseSpecial, nil)
}

// Span is the byte range [Start, End) of a text.
type Span struct{ Start, End int }

// EncodeSpans tokenizes text as Encode(text, addSpecial, true) does, except
// that a control or unknown token whose text overlaps one of the plain spans is
// not taken: that text stays plain text, as with parseSpecial off. It lets a
// rendered chat keep its template's markup as control tokens while the
// messages inside it cannot forge them. The text is tokenized whole, not span
// by span, so that ids across span boundaries are those Encode gives. Spans may
// come in any order, overlap, or reach past the text.
func (t *Tokenizer) EncodeSpans(text string, addSpecial bool, plain []Span) []int32 {
	return t.encode(text, addSpecial, true, normalizeSpans(plain, len(text)))
}

func (t *Tokenizer) encode(text string, addSpecial, parseSpecial bool, plain []Span) []int32 {
	if len(text) > MaxEncodeBytes {
		return nil
	}
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial, plain)
	}
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	switch t.kind {
	case kindSPM:
		s := spmSession{t: t}
		prevSpecial := true // the first raw fragment gets the space prefix too
		var buf strings.Builder
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f.token)
				prevSpecial = true
				continue
			}
			buf.Reset()
			if t.addSpacePrefix && prevSpecial {
				buf.WriteByte(' ')
			}
			buf.WriteString(text[f.offset : f.offset+f.length])
			out = s.tokenize(strings.ReplaceAll(buf.String(), " ", "\u2581"), out)
			prevSpecial = false
		}
	case kindBPE:
		s := bpeSession{t: t}
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f.token)
				continue
			}
			raw := text[f.offset : f.offset+f.length]
			if t.spmBPE {
				raw = strings.ReplaceAll(raw, " ", "\u2581")
			}
			out = s.tokenize(raw, out)
		}
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text around the special tokens it contains, longest token
// first, as llama.cpp's tokenizer_st_partition does. Control and unknown tokens
// are only matched when parseSpecial is set, and then not where they overlap a
// span of plain (sorted, disjoint).
func (t *Tokenizer) partition(text string, parseSpecial bool, plain []Span) []fragment {
	frags := []fragment{{token: -1, offset: 0, length: len(text)}}
	var present [256]bool
	for i := 0; i < len(text); i++ {
		present[text[i]] = true
	}
	var next []fragment
	for _, id := range t.special {
		attr := t.attrs[id]
		gated := attr&(attrControl|attrUnknown) != 0
		if !parseSpecial && gated {
			continue
		}
		masked := gated && len(plain) > 0
		tok := t.texts[id]
		if !present[tok[0]] {
			continue
		}
		next = next[:0]
		changed := false
		for _, f := range frags {
			if f.token >= 0 {
				next = append(next, f)
				continue
			}
			base, length := f.offset, f.length
			for length > 0 {
				var k int
				if masked {
					k = indexOutside(text, tok, base, base+length, plain)
				} else {
					k = strings.Index(text[base:base+length], tok)
				}
				if k < 0 {
					next = append(next, fragment{token: -1, offset: base, length: length})
					break
				}
				changed = true
				leftLen := k
				if attr&attrLStrip != 0 {
					for leftLen > 0 && isCSpace(text[base+leftLen-1]) {
						leftLen--
					}
				}
				if leftLen > 0 {
					next = append(next, fragment{token: -1, offset: base, length: leftLen})
				}
				next = append(next, fragment{token: id, offset: base + k, length: len(tok)})
				rightOff := base + k + len(tok)
				rightLen := base + length - rightOff
				if attr&attrRStrip != 0 {
					for rightLen > 0 && isCSpace(text[rightOff]) {
						rightOff++
						rightLen--
					}
				}
				base, length = rightOff, rightLen
			}
		}
		if changed {
			frags, next = next, frags
		}
	}
	return frags
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(b byte) bool {
	return b == ' ' || (b >= '\t' && b <= '\r')
}

// normalizeSpans clips spans to [0, n) and returns them sorted and merged,
// dropping empty ones.
func normalizeSpans(spans []Span, n int) []Span {
	out := make([]Span, 0, len(spans))
	for _, s := range spans {
		s.Start, s.End = max(s.Start, 0), min(s.End, n)
		if s.Start < s.End {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	merged := out[:0]
	for _, s := range out {
		if k := len(merged) - 1; k >= 0 && s.Start <= merged[k].End {
			merged[k].End = max(merged[k].End, s.End)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// indexOutside returns the offset from start of the first occurrence of tok in
// text[start:end] that does not overlap any of the sorted, disjoint spans, or
// -1. It searches only the gaps between spans, so text inside them costs
// nothing.
func indexOutside(text, tok string, start, end int, spans []Span) int {
	pos := start
	i := sort.Search(len(spans), func(i int) bool { return spans[i].End > pos })
	for pos < end {
		if i < len(spans) && spans[i].Start <= pos {
			pos = spans[i].End
			i++
			continue
		}
		gapEnd := end
		if i < len(spans) {
			gapEnd = min(end, spans[i].Start)
		}
		if k := strings.Index(text[pos:gapEnd], tok); k >= 0 {
			return pos + k - start
		}
		pos = gapEnd
	}
	return -1
}
