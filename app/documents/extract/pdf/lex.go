package pdf

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"nibble/app/documents"
)

// PDF objects as parsed here:
//
//	nil, bool, int64, float64, pdfString, pdfName, pdfArray, pdfDict,
//	pdfRef, *pdfStream, pdfKeyword (content-stream operators only).
type (
	pdfName    string
	pdfString  string // raw bytes
	pdfKeyword string
	pdfArray   []any
	pdfDict    map[pdfName]any
	pdfRef     struct{ num, gen int }
	pdfStream  struct {
		dict pdfDict
		raw  []byte // the encoded bytes (a slice of the file)
		ref  pdfRef // the object that holds it, for decryption
	}
)

// maxPDFElems bounds the elements of one array or dictionary.
const maxPDFElems = 1 << 20

var errPDFEOF = errors.New("unexpected end of data")

// pdfLexer reads PDF tokens and objects from a byte slice.
type pdfLexer struct {
	b        []byte
	pos      int
	maxDepth int
	refs     bool // "n g R" is a reference (off in content streams)
}

func isPDFSpace(c byte) bool {
	return c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

func isPDFDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func isPDFRegular(c byte) bool { return !isPDFSpace(c) && !isPDFDelim(c) }

// skipSpace skips white space and comments.
func (l *pdfLexer) skipSpace() {
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		if isPDFSpace(c) {
			l.pos++
			continue
		}
		if c == '%' {
			for l.pos < len(l.b) && l.b[l.pos] != '\n' && l.b[l.pos] != '\r' {
				l.pos++
			}
			continue
		}
		return
	}
}

// token kinds returned by next besides objects.
type pdfDelim byte

const (
	delimArrayOpen  pdfDelim = '['
	delimArrayClose pdfDelim = ']'
	delimDictOpen   pdfDelim = '<'
	delimDictClose  pdfDelim = '>'
	delimBraceOpen  pdfDelim = '{'
	delimBraceClose pdfDelim = '}'
)

// next reads one token: a number, string, name, keyword (as pdfKeyword,
// including true/false/null) or delimiter (pdfDelim). It returns errPDFEOF
// at the end of data.
func (l *pdfLexer) next() (any, error) {
	l.skipSpace()
	if l.pos >= len(l.b) {
		return nil, errPDFEOF
	}
	c := l.b[l.pos]
	switch c {
	case '[', ']', '{', '}':
		l.pos++
		return pdfDelim(c), nil
	case '<':
		if l.pos+1 < len(l.b) && l.b[l.pos+1] == '<' {
			l.pos += 2
			return delimDictOpen, nil
		}
		return l.hexString()
	case '>':
		if l.pos+1 < len(l.b) && l.b[l.pos+1] == '>' {
			l.pos += 2
			return delimDictClose, nil
		}
		l.pos++
		return nil, fmt.Errorf("stray '>' at byte %d", l.pos-1)
	case '(':
		return l.literalString()
	case ')':
		l.pos++
		return nil, fmt.Errorf("stray ')' at byte %d", l.pos-1)
	case '/':
		return l.name(), nil
	}
	start := l.pos
	for l.pos < len(l.b) && isPDFRegular(l.b[l.pos]) {
		l.pos++
	}
	word := l.b[start:l.pos]
	if n, ok := parsePDFNumber(word); ok {
		return n, nil
	}
	return pdfKeyword(word), nil
}

// parsePDFNumber reads integers and reals ("12", "-3", "+.5", "4.", "1.2.3"
// is not a number).
func parsePDFNumber(w []byte) (any, bool) {
	if len(w) == 0 || len(w) > 64 {
		return nil, false
	}
	i := 0
	if w[0] == '+' || w[0] == '-' {
		i++
	}
	digits, dots := 0, 0
	for _, c := range w[i:] {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return nil, false
		}
	}
	if digits == 0 || dots > 1 {
		// "--5" and the like are garbage; treat a lone sign as not a number.
		return nil, false
	}
	if digits <= 15 { // the common case, without strconv's allocation
		var v int64
		frac := 0
		for _, c := range w[i:] {
			if c == '.' {
				frac = 1
				continue
			}
			v = v*10 + int64(c-'0')
			if frac > 0 {
				frac *= 10
			}
		}
		if w[0] == '-' {
			v = -v
		}
		if dots == 0 {
			return v, true
		}
		return float64(v) / float64(frac), true
	}
	s := string(w)
	if dots == 0 {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return float64(0), true
	}
	return f, true
}

func (l *pdfLexer) name() pdfName {
	l.pos++ // '/'
	var out []byte
	start := l.pos
	for l.pos < len(l.b) && isPDFRegular(l.b[l.pos]) {
		c := l.b[l.pos]
		if c == '#' && l.pos+2 < len(l.b) && isHex(l.b[l.pos+1]) && isHex(l.b[l.pos+2]) {
			if out == nil {
				out = append([]byte{}, l.b[start:l.pos]...)
			}
			out = append(out, unhex(l.b[l.pos+1])<<4|unhex(l.b[l.pos+2]))
			l.pos += 3
			continue
		}
		if out != nil {
			out = append(out, c)
		}
		l.pos++
	}
	if out != nil {
		return pdfName(out)
	}
	return pdfName(l.b[start:l.pos])
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

func (l *pdfLexer) hexString() (any, error) {
	l.pos++ // '<'
	var out []byte
	var hi byte
	half := false
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		l.pos++
		switch {
		case c == '>':
			if half {
				out = append(out, hi<<4)
			}
			return pdfString(out), nil
		case isHex(c):
			if half {
				out = append(out, hi<<4|unhex(c))
			} else {
				hi = unhex(c)
			}
			half = !half
		case isPDFSpace(c):
		default:
			return nil, fmt.Errorf("bad character %q in hex string at byte %d", c, l.pos-1)
		}
	}
	return nil, errPDFEOF
}

func (l *pdfLexer) literalString() (any, error) {
	l.pos++ // '('
	var out []byte
	nest := 1
	for l.pos < len(l.b) {
		c := l.b[l.pos]
		l.pos++
		switch c {
		case '(':
			nest++
		case ')':
			nest--
			if nest == 0 {
				return pdfString(out), nil
			}
		case '\r':
			// An end of line in a string is "\n" whatever its bytes.
			if l.pos < len(l.b) && l.b[l.pos] == '\n' {
				l.pos++
			}
			c = '\n'
		case '\\':
			if l.pos >= len(l.b) {
				return nil, errPDFEOF
			}
			e := l.b[l.pos]
			l.pos++
			switch e {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if l.pos < len(l.b) && l.b[l.pos] == '\n' {
					l.pos++
				}
				continue
			case '\n':
				continue
			default:
				if e >= '0' && e <= '7' {
					v := int(e - '0')
					for k := 0; k < 2 && l.pos < len(l.b) && l.b[l.pos] >= '0' && l.b[l.pos] <= '7'; k++ {
						v = v*8 + int(l.b[l.pos]-'0')
						l.pos++
					}
					c = byte(v)
				} else {
					c = e
				}
			}
		}
		out = append(out, c)
	}
	return nil, errPDFEOF
}

// object reads one object. depth counts enclosing arrays and dictionaries.
func (l *pdfLexer) object(depth int) (any, error) {
	tok, err := l.next()
	if err != nil {
		return nil, err
	}
	return l.objectFrom(tok, depth)
}

func (l *pdfLexer) objectFrom(tok any, depth int) (any, error) {
	switch t := tok.(type) {
	case int64:
		if l.refs && t >= 0 {
			save := l.pos
			if gen, err := l.next(); err == nil {
				if g, ok := gen.(int64); ok && g >= 0 && g < 1<<16 {
					if r, err := l.next(); err == nil && r == pdfKeyword("R") && t < 1<<31 {
						return pdfRef{int(t), int(g)}, nil
					}
				}
			}
			l.pos = save
		}
		return t, nil
	case pdfKeyword:
		switch t {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
		return t, nil
	case pdfDelim:
		switch t {
		case delimArrayOpen:
			if depth >= l.maxDepth {
				return nil, fmt.Errorf("%w: PDF objects nested deeper than %d levels", documents.ErrLimit, l.maxDepth)
			}
			var arr pdfArray
			for {
				tok, err := l.next()
				if err != nil {
					return nil, err
				}
				if tok == delimArrayClose {
					return arr, nil
				}
				v, err := l.objectFrom(tok, depth+1)
				if err != nil {
					return nil, err
				}
				if len(arr) >= maxPDFElems {
					return nil, fmt.Errorf("%w: a PDF array with more than %d elements", documents.ErrLimit, maxPDFElems)
				}
				arr = append(arr, v)
			}
		case delimDictOpen:
			if depth >= l.maxDepth {
				return nil, fmt.Errorf("%w: PDF objects nested deeper than %d levels", documents.ErrLimit, l.maxDepth)
			}
			d := pdfDict{}
			for {
				tok, err := l.next()
				if err != nil {
					return nil, err
				}
				if tok == delimDictClose {
					return d, nil
				}
				key, ok := tok.(pdfName)
				if !ok {
					// Tolerate junk between entries: skip it.
					if _, err := l.objectFrom(tok, depth+1); err != nil {
						return nil, err
					}
					continue
				}
				tok, err = l.next()
				if err != nil {
					return nil, err
				}
				if tok == delimDictClose { // a key without a value
					d[key] = nil
					return d, nil
				}
				v, err := l.objectFrom(tok, depth+1)
				if err != nil {
					return nil, err
				}
				if len(d) >= maxPDFElems {
					return nil, fmt.Errorf("%w: a PDF dictionary with more than %d entries", documents.ErrLimit, maxPDFElems)
				}
				d[key] = v
			}
		case delimBraceOpen, delimBraceClose:
			return t, nil // PostScript procedures: only in functions, ignored
		}
		return nil, fmt.Errorf("unexpected %q at byte %d", byte(t), l.pos-1)
	}
	return tok, nil
}

// Accessors that tolerate wrong types: a wrong type reads as absent.

func dictGet(d pdfDict, key string) any {
	if d == nil {
		return nil
	}
	return d[pdfName(key)]
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		if n >= -1e15 && n <= 1e15 {
			return int64(n), true
		}
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func asName(v any) string {
	n, _ := v.(pdfName)
	return string(n)
}

// findKeyword returns the index of the keyword kw in b at or after from, as
// a whole token (not part of a longer word), or -1.
func findKeyword(b []byte, kw string, from int) int {
	for from <= len(b) {
		i := bytes.Index(b[from:], []byte(kw))
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(kw)
		if (i == 0 || !isPDFRegular(b[i-1])) && (end >= len(b) || !isPDFRegular(b[end])) {
			return i
		}
		from = i + 1
	}
	return -1
}
