package tokenizer

import "strings"

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
	if len(text) > MaxEncodeBytes {
		return nil
	}
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
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
			out = s.tokenize(text[f.offset:f.offset+f.length], out)
		}
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text around the special tokens it contains, longest token
// first, as llama.cpp's tokenizer_st_partition does. Control and unknown tokens
// are only matched when parseSpecial is set.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{token: -1, offset: 0, length: len(text)}}
	var present [256]bool
	for i := 0; i < len(text); i++ {
		present[text[i]] = true
	}
	var next []fragment
	for _, id := range t.special {
		attr := t.attrs[id]
		if !parseSpecial && attr&(attrControl|attrUnknown) != 0 {
			continue
		}
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
				k := strings.Index(text[base:base+length], tok)
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
