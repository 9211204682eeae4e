package history

import (
	"strings"
	"unicode"
)

// TitleRunes is the most characters DeriveTitle returns.
const TitleRunes = 60

// DeriveTitle makes a conversation title from its first user message: the
// first non-blank line, whitespace collapsed, invalid UTF-8 replaced, cut
// to at most TitleRunes characters (at a word boundary when one is near,
// ending in "…"). It returns "" when the message has no visible text.
func DeriveTitle(firstUserMessage string) string {
	text := strings.ToValidUTF8(firstUserMessage, "\uFFFD")
	var line []rune
	for l := range strings.Lines(text) {
		if line = collapse(l); len(line) > 0 {
			break
		}
	}
	if len(line) <= TitleRunes {
		return string(line)
	}
	end := TitleRunes - 1 // room for "…"
	// Prefer the last space in the second half, so a word is not split.
	for i := end; i > TitleRunes/2; i-- {
		if line[i] == ' ' {
			end = i
			break
		}
	}
	// Cut before a whole cluster: not between a base and its combining
	// marks, skin-tone modifier or zero-width joiner.
	cut := end
	for cut > 0 && (attaches(line[cut]) || line[cut-1] == '\u200d') {
		cut--
	}
	if cut == 0 { // nothing but marks: a hard cut is all that is left
		cut = end
	}
	return strings.TrimRight(string(line[:cut]), " ") + "…"
}

// attaches reports whether r modifies the rune before it.
func attaches(r rune) bool {
	return unicode.Is(unicode.M, r) || r == '\u200d' || (r >= 0x1F3FB && r <= 0x1F3FF)
}
