package msl

import (
	"sort"
	"strings"
)

// Token is one token of MSL source. Comments, whitespace and preprocessor lines are
// not tokens; the pre-pass edits the source by byte ranges of tokens, so
// whatever it does not touch stays exactly as written.
type Token struct {
	Kind     byte // 'i' identifier, 'n' number, 's' string, 'c' character, 'p' punctuation
	Text     string
	Pos, End int // byte offsets in the source
}

// Is reports whether the token is the identifier or punctuation s (never a
// string or character literal that happens to spell it).
func (t Token) Is(s string) bool { return t.Kind != 's' && t.Kind != 'c' && t.Text == s }

type scanner struct {
	src   string
	lines []int // byte offset of each line start
}

func newScanner(src string) *scanner {
	s := &scanner{src: src, lines: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	return s
}

// line returns the 1-based line of byte offset pos.
func (s *scanner) line(pos int) int {
	return sort.Search(len(s.lines), func(i int) bool { return s.lines[i] > pos })
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// tokens splits the source. An unterminated comment, string or character
// literal is an error at its line.
func (s *scanner) tokens() ([]Token, error) {
	src := s.src
	var toks []Token
	lineStart := true // only whitespace since the last newline
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			lineStart = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, &Error{Line: s.line(i), Msg: "unterminated comment"}
			}
			i += j + 4
			continue
		case c == '#' && lineStart:
			// A preprocessor line with its continuations: kept, not parsed.
			for i < len(src) && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n' {
					i += 2
					continue
				}
				if src[i] == '/' && i+1 < len(src) && src[i+1] == '*' {
					j := strings.Index(src[i+2:], "*/")
					if j < 0 {
						return nil, &Error{Line: s.line(i), Msg: "unterminated comment"}
					}
					i += j + 4
					continue
				}
				i++
			}
			continue
		}
		lineStart = false
		start := i
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdent(src[i]) {
				i++
			}
			toks = append(toks, Token{'i', src[start:i], start, i})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			// A preprocessing number: digits, letters, '.', digit separators,
			// and a sign right after an exponent letter.
			for i < len(src) {
				d := src[i]
				if isIdent(d) || d == '.' || d == '\'' ||
					(d == '+' || d == '-') && strings.ContainsRune("eEpP", rune(src[i-1])) {
					i++
					continue
				}
				break
			}
			toks = append(toks, Token{'n', src[start:i], start, i})
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				if i < len(src) && src[i] == '\n' {
					return nil, &Error{Line: s.line(start), Msg: "unterminated literal"}
				}
				i++
			}
			if i >= len(src) {
				return nil, &Error{Line: s.line(start), Msg: "unterminated literal"}
			}
			i++
			kind := byte('s')
			if c == '\'' {
				kind = 'c'
			}
			toks = append(toks, Token{kind, src[start:i], start, i})
		case c == ':' && i+1 < len(src) && src[i+1] == ':':
			i += 2
			toks = append(toks, Token{'p', "::", start, i})
		default:
			i++
			toks = append(toks, Token{'p', src[start:i], start, i})
		}
	}
	return toks, nil
}

func isHex(num string) bool { return len(num) > 1 && num[0] == '0' && (num[1] == 'x' || num[1] == 'X') }

// FixLiteral turns MSL's half literal suffix (1.0h) into clang's (1.0f16).
func FixLiteral(t Token) (string, bool) {
	if t.Kind != 'n' || isHex(t.Text) {
		return t.Text, false
	}
	n := len(t.Text)
	if n < 2 || (t.Text[n-1] != 'h' && t.Text[n-1] != 'H') {
		return t.Text, false
	}
	for i := 0; i < n-1; i++ {
		c := t.Text[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return t.Text, false
		}
	}
	return t.Text[:n-1] + "f16", true
}

// Join writes tokens as one line of source (for text the pre-pass moves
// into generated code, where a newline would shift the line numbers).
func Join(toks []Token) string {
	var b strings.Builder
	for k, t := range toks {
		if k > 0 && needSpace(toks[k-1], t) {
			b.WriteByte(' ')
		}
		s, _ := FixLiteral(t)
		b.WriteString(s)
	}
	return b.String()
}

func needSpace(a, b Token) bool {
	if a.Kind == 'p' && b.Kind == 'p' {
		// Keep "> >" apart (old-style nested templates) and never glue two
		// operators into a different one.
		return true
	}
	return (a.Kind != 'p') && (b.Kind != 'p') || a.Is(",")
}
