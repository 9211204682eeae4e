package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// String literals. jinja2 decodes a literal like a Python string (unicode-escape): \n \t \\ \'
// \xhh \uXXXX \ooo, backslash-newline as a line continuation, unknown escapes such as \q kept
// as written. gonja's lexer ends a literal at any quote preceded by a backslash (so '\\' never
// ends) and its parser applies Go's escape rules (so \q is a syntax error and
// backslash-newline turns into "\n" text). Each literal is therefore decoded here with Python's
// rules and re-encoded with only what gonja reads back unchanged: plain characters, and \uXXXX
// for quotes, backslashes and control characters.

// rewriteStringLiterals re-encodes every string literal in one tag's text, joining adjacent ones.
func rewriteStringLiterals(s string) string {
	if !strings.ContainsAny(s, `'"`) {
		return s
	}
	var out strings.Builder
	last := 0
	for i := 0; i < len(s); {
		if s[i] != '\'' && s[i] != '"' {
			i++
			continue
		}
		end := skipString(s, i)
		if end < 0 {
			break // unterminated: the parser reports it
		}
		value, err := pyUnescape(s[i+1 : end-1])
		if err != nil {
			i = end
			continue
		}
		// adjacent literals are one string, as in Python ('a' 'b' == 'ab')
		for {
			j := skipSpaces(s, end)
			if j >= len(s) || (s[j] != '\'' && s[j] != '"') {
				break
			}
			next := skipString(s, j)
			if next < 0 {
				break
			}
			more, err := pyUnescape(s[j+1 : next-1])
			if err != nil {
				break
			}
			value += more
			end = next
		}
		out.WriteString(s[last:i])
		out.WriteString(gonjaLiteral(value))
		last, i = end, end
	}
	out.WriteString(s[last:])
	return out.String()
}

// gonjaLiteral quotes v so that gonja's lexer and parser yield exactly v.
func gonjaLiteral(v string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(v[i])|0x100, 16)[1:])
		case r == '\'' || r == '"' || r == '\\' || r < 0x20 || r == 0x7f:
			writeUEscape(&b, r)
		default:
			b.WriteString(v[i : i+size])
		}
		i += size
	}
	b.WriteByte('\'')
	return b.String()
}

// pyUnescape decodes the body of a Python string literal (between the quotes).
func pyUnescape(s string) (string, error) {
	if !strings.ContainsAny(s, "\\\r") {
		return s, nil
	}
	// jinja2 normalizes newlines before decoding
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return "", fmt.Errorf("string literal ends with a backslash")
		}
		switch e := s[i]; e {
		case '\n':
			// line continuation
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := 0
			j := i
			for ; j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7'; j++ {
				n = n*8 + int(s[j]-'0')
			}
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+digits > len(s) {
				return "", fmt.Errorf(`truncated \%c escape`, e)
			}
			n, err := strconv.ParseUint(s[i+1:i+1+digits], 16, 32)
			if err != nil || n > utf8.MaxRune {
				return "", fmt.Errorf(`invalid \%c escape`, e)
			}
			b.WriteRune(rune(n))
			i += digits
		default:
			// unknown escapes (including \N{...}, not supported) stay as written
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
