package chat

import "strings"

// applyLStripBlocks does jinja2's lstrip_blocks on the source text, before gonja sees it.
//
// gonja's own LeftStripBlocks also strips spaces that follow an expression on the same line
// ("{{ x }} {% if y %}" loses the space), which jinja2 does not: jinja2 removes the spaces and
// tabs before a {% or {# tag only when nothing but whitespace precedes the tag on its line. The
// rule here is jinja2's: the whitespace between the last newline of the preceding text (or the
// start of a line) and the tag goes, unless the tag opens with '+' (keep) or '-' (gonja strips
// all whitespace itself).
func applyLStripBlocks(src string) string {
	var out strings.Builder
	out.Grow(len(src))
	textStart := 0
	pos := 0
	for {
		open := nextTagOpen(src, pos)
		if open < 0 {
			break
		}
		kind := src[open+1]
		text := src[textStart:open]
		sign := byte(0)
		if open+2 < len(src) && (src[open+2] == '+' || src[open+2] == '-') {
			sign = src[open+2]
		}
		if kind != '{' && sign == 0 {
			text = lstripLastLine(text, textStart == 0 || src[textStart-1] == '\n')
		}
		out.WriteString(text)

		end := tagEnd(src, open)
		if end < 0 {
			// Unterminated tag: leave the rest to the parser, which reports it.
			textStart = open
			break
		}
		out.WriteString(src[open:end])
		textStart, pos = end, end
		if kind == '%' && rawOpenRe.MatchString(src[open:end]) {
			// The body of {% raw %} is text, tags included, up to {% endraw %}.
			loc := rawCloseRe.FindStringIndex(src[end:])
			if loc == nil {
				break
			}
			out.WriteString(src[end : end+loc[0]])
			textStart, pos = end+loc[0], end+loc[0]
		}
	}
	out.WriteString(src[textStart:])
	return out.String()
}

// lstripLastLine drops the trailing run of whitespace after the last newline of text, when that
// run is all whitespace and really starts a line.
func lstripLastLine(text string, lineStarting bool) string {
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos == 0 && !lineStarting {
		return text
	}
	tail := text[lpos:]
	if tail == "" {
		return text
	}
	for _, r := range tail {
		if !pyIsSpace(r) {
			return text
		}
	}
	return text[:lpos]
}
