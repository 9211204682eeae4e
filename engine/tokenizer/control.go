package tokenizer

import (
	"sort"
	"strings"
)

// gated reports whether id is matched in text only when special-token parsing
// is on (control and unknown tokens).
func (t *Tokenizer) gated(id int32) bool {
	return t.attrs[id]&(attrControl|attrUnknown) != 0
}

// ControlSpans returns where text holds the text of a control or unknown token,
// sorted, longest token first where occurrences overlap: the places that
// parseSpecial would turn into such tokens. Callers use it to tell whether
// untrusted text could forge control tokens.
func (t *Tokenizer) ControlSpans(text string) []Span {
	var found []Span
	raw := []Span{{0, len(text)}} // text not yet claimed by a longer token
	var next []Span
	for _, id := range t.special {
		if !t.gated(id) {
			continue
		}
		tok := t.texts[id]
		next = next[:0]
		for _, r := range raw {
			for r.Start < r.End {
				k := strings.Index(text[r.Start:r.End], tok)
				if k < 0 {
					next = append(next, r)
					break
				}
				if k > 0 {
					next = append(next, Span{r.Start, r.Start + k})
				}
				found = append(found, Span{r.Start + k, r.Start + k + len(tok)})
				r.Start += k + len(tok)
			}
		}
		raw, next = next, raw
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Start < found[j].Start })
	return found
}

// ControlEdge reports whether text begins with a proper suffix or ends with a
// proper prefix of a control or unknown token's text: put next to other text,
// it could complete such a token even though it holds none itself.
func (t *Tokenizer) ControlEdge(text string) bool {
	if text == "" {
		return false
	}
	first, last := text[0], text[len(text)-1]
	for _, id := range t.special {
		if !t.gated(id) {
			continue
		}
		tok := t.texts[id]
		for k := 1; k < len(tok); k++ {
			if tok[k-1] == last && strings.HasSuffix(text, tok[:k]) {
				return true
			}
			if tok[k] == first && strings.HasPrefix(text, tok[k:]) {
				return true
			}
		}
	}
	return false
}
