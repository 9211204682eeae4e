package chat

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// preprocess rewrites a transformers chat template into text that gonja parses the way jinja2
// parses the original. Inside {{ }} and {% %} tags, string literals are re-encoded (gonja does
// not decode Python escapes), 'literal' % args becomes a filter call (gonja's % is numeric
// only) and so does a parenthesized conditional (inlineif.go); then jinja2's lstrip_blocks is
// applied. Newlines are never added or removed, so line numbers in errors still match the
// source.
func preprocess(src string) string {
	return applyLStripBlocks(rewriteTags(src, func(inner string) string {
		return rewriteInlineIf(rewritePercentExpr(rewriteStringLiterals(inner)))
	}))
}

// Limits that keep a hostile template from exhausting the stack of gonja's recursive parser;
// real chat templates are a few KiB with brackets nested a few levels deep.
const (
	maxTemplateBytes = 256 << 10
	maxBracketDepth  = 64
)

// checkLimits rejects templates beyond the size and bracket-nesting limits.
func checkLimits(src string) error {
	if len(src) > maxTemplateBytes {
		return fmt.Errorf("template is %d bytes, more than %d", len(src), maxTemplateBytes)
	}
	for pos := 0; ; {
		open := nextTagOpen(src, pos)
		if open < 0 {
			return nil
		}
		end, deepest := tagEndDepth(src, open)
		if deepest > maxBracketDepth {
			line := strings.Count(src[:open], "\n") + 1
			return fmt.Errorf("line %d: brackets nested deeper than %d", line, maxBracketDepth)
		}
		if end < 0 {
			return nil
		}
		pos = end
	}
}

// rewriteTags replaces the text between the delimiters of every {{ }} and {% %} tag with
// fn(text), leaving template data, comments and {% raw %} bodies alone.
func rewriteTags(src string, fn func(string) string) string {
	var out strings.Builder
	out.Grow(len(src) + len(src)/8)
	pos := 0
	for {
		open := nextTagOpen(src, pos)
		if open < 0 {
			break
		}
		end := tagEnd(src, open)
		if end < 0 {
			break
		}
		out.WriteString(src[pos : open+2])
		inner := src[open+2 : end-2]
		if src[open+1] != '#' {
			inner = fn(inner)
		}
		out.WriteString(inner)
		out.WriteString(src[end-2 : end])
		pos = end
		if src[open+1] == '%' && rawOpenRe.MatchString(src[open:end]) {
			if loc := rawCloseRe.FindStringIndex(src[end:]); loc != nil {
				out.WriteString(src[end : end+loc[0]])
				pos = end + loc[0]
			}
		}
	}
	out.WriteString(src[pos:])
	return out.String()
}

var (
	rawOpenRe  = regexp.MustCompile(`^\{%[-+]?\s*raw\s*[-+]?%\}$`)
	rawCloseRe = regexp.MustCompile(`\{%[-+]?\s*endraw\s*[-+]?%\}`)
)

// nextTagOpen finds the next "{{", "{%" or "{#" at or after pos.
func nextTagOpen(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 {
			return -1
		}
		i += pos
		if i+1 < len(src) && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
		pos = i + 1
	}
}

// tagEnd returns the index just past the tag opened at open, or -1. Inside {{ }} and {% %} the
// closing delimiter only counts outside string literals and with brackets balanced, as in
// jinja2's lexer.
func tagEnd(src string, open int) int {
	end, _ := tagEndDepth(src, open)
	return end
}

// tagEndDepth is tagEnd that also reports the deepest bracket nesting inside the tag.
func tagEndDepth(src string, open int) (int, int) {
	kind := src[open+1]
	if kind == '#' {
		i := strings.Index(src[open+2:], "#}")
		if i < 0 {
			return -1, 0
		}
		return open + 2 + i + 2, 0
	}
	closer := byte('}')
	if kind == '%' {
		closer = '%'
	}
	depth, deepest := 0, 0
	for i := open + 2; i < len(src); {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			j := skipString(src, i)
			if j < 0 {
				return -1, deepest
			}
			i = j
			continue
		case depth == 0 && c == closer && i+1 < len(src) && src[i+1] == '}':
			return i + 2, deepest
		case c == '{' || c == '(' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ')' || c == ']':
			if depth > 0 {
				depth--
			}
		}
		_, size := utf8.DecodeRuneInString(src[i:])
		i += size
	}
	return -1, deepest
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at i, or -1.
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return -1
}

// skipGroup returns the index after the bracket group opening at i, or -1.
func skipGroup(s string, i int) int {
	depth := 0
	for j := i; j < len(s); {
		switch c := s[j]; c {
		case '\'', '"':
			k := skipString(s, j)
			if k < 0 {
				return -1
			}
			j = k
			continue
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
		j++
	}
	return -1
}
