package tokenizer

import (
	"sync"
	"unicode"
)

// Codepoint flags as llama.cpp's unicode-data tables define them: exactly one
// category bit (Unicode general category, Cn = undefined) plus a whitespace bit
// (the Unicode White_Space property, which is what Go's unicode.IsSpace tests).
const (
	flagUndefined  uint16 = 0x0001
	flagNumber     uint16 = 0x0002 // \p{N}
	flagLetter     uint16 = 0x0004 // \p{L}
	flagSeparator  uint16 = 0x0008 // \p{Z}
	flagMark       uint16 = 0x0010 // \p{M}
	flagPunct      uint16 = 0x0020 // \p{P}
	flagSymbol     uint16 = 0x0040 // \p{S}
	flagControl    uint16 = 0x0080 // \p{C} minus Cn
	flagCategories uint16 = 0x00FF
	flagWhitespace uint16 = 0x0100
)

const maxCodepoint = 0x110000

// bmpFlags caches flags for the Basic Multilingual Plane; the rest are computed
// on demand (rare in practice).
var (
	bmpOnce  sync.Once
	bmpTable []uint16
)

// cptFlags returns llama.cpp's unicode_cpt_flags_from_cpt for c. Out-of-range
// values (the decoder can produce up to 0x1FFFFF) are undefined.
func cptFlags(c rune) uint16 {
	if c < 0 || c >= maxCodepoint {
		return flagUndefined
	}
	if c < 0x10000 {
		bmpOnce.Do(buildBMPTable)
		return bmpTable[c]
	}
	return computeFlags(c)
}

func buildBMPTable() {
	t := make([]uint16, 0x10000)
	for c := range t {
		t[c] = computeFlags(rune(c))
	}
	bmpTable = t
}

func computeFlags(c rune) uint16 {
	var f uint16
	switch {
	case unicode.IsLetter(c) || isUnicode151Letter(c):
		f = flagLetter
	case unicode.IsNumber(c):
		f = flagNumber
	case unicode.IsMark(c):
		f = flagMark
	case unicode.IsPunct(c):
		f = flagPunct
	case unicode.IsSymbol(c) || isUnicode151Symbol(c):
		f = flagSymbol
	case unicode.Is(unicode.Z, c):
		f = flagSeparator
	case unicode.Is(unicode.C, c):
		f = flagControl
	default:
		f = flagUndefined
	}
	if unicode.IsSpace(c) {
		f |= flagWhitespace
	}
	return f
}

// llama.cpp's tables are Unicode 15.1; Go's are 15.0. These are the 15.1
// additions that matter for the categories above.
func isUnicode151Letter(c rune) bool { return c >= 0x2EBF0 && c <= 0x2EE5D }
func isUnicode151Symbol(c rune) bool { return (c >= 0x2FFC && c <= 0x2FFF) || c == 0x31EF }

// utf8SeqLen is llama.cpp's unicode_len_utf8: the sequence length implied by a
// lead byte's high nibble, 1 for continuation bytes.
func utf8SeqLen(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// decodeCodepoints mirrors llama.cpp's unicode_cpts_from_utf8: no overlong or
// surrogate checks, and each byte that does not start a well-formed sequence
// becomes U+FFFD. Callers rely on these exact quirks to split text identically.
func decodeCodepoints(s string, out []rune) []rune {
	out = out[:0]
	for i := 0; i < len(s); {
		c, n := decodeOne(s, i)
		out = append(out, c)
		i += n
	}
	return out
}

func decodeOne(s string, i int) (rune, int) {
	b0 := s[i]
	if b0&0x80 == 0 {
		return rune(b0), 1
	}
	if b0&0x40 == 0 {
		return 0xFFFD, 1
	}
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	if b0&0x20 == 0 {
		if !cont(1) {
			return 0xFFFD, 1
		}
		return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	}
	if b0&0x10 == 0 {
		if !cont(1) || !cont(2) {
			return 0xFFFD, 1
		}
		return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	if b0&0x08 == 0 {
		if !cont(1) || !cont(2) || !cont(3) {
			return 0xFFFD, 1
		}
		return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
	}
	return 0xFFFD, 1
}

// appendCodepoint mirrors llama.cpp's unicode_cpt_to_utf8, which encodes
// surrogates as three bytes. Values above U+10FFFF make llama.cpp throw; we
// write U+FFFD instead so that tokenization never fails.
func appendCodepoint(b []byte, c rune) []byte {
	switch {
	case c >= 0 && c <= 0x7F:
		return append(b, byte(c))
	case c >= 0x80 && c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6&0x1F), 0x80|byte(c&0x3F))
	case c >= 0x800 && c <= 0xFFFF:
		return append(b, 0xE0|byte(c>>12&0x0F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	case c >= 0x10000 && c <= 0x10FFFF:
		return append(b, 0xF0|byte(c>>18&0x07), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(b, 0xEF, 0xBF, 0xBD)
}

// GPT-2 byte-level alphabet: printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order.
var (
	byteToRune [256]rune
	byteToUTF8 [256]string
	runeToByte map[rune]byte
)

func init() {
	printable := func(b int) bool {
		return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	runeToByte = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = rune(256 + n)
			n++
		}
		byteToRune[b] = r
		byteToUTF8[b] = string(r)
		runeToByte[r] = byte(b)
	}
}

// toLowerLlama is unicode_tolower (simple lowercase mapping).
func toLowerLlama(c rune) rune {
	if c < 0 || c >= maxCodepoint {
		return c
	}
	return unicode.ToLower(c)
}
