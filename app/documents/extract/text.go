package extract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"nibble/app/documents"
)

// extractPlain reads text, Markdown, source code, CSV and JSON: the text is
// the file's own, decoded to UTF-8 with "\n" line ends, so line numbers
// match the file.
func extractPlain(kind documents.Kind, data []byte, lim documents.Limits) (*documents.Document, error) {
	text, warnings, err := decodeText(data, lim)
	if err != nil {
		return nil, err
	}
	doc := &documents.Document{Text: text, Warnings: warnings}
	if kind == documents.KindJSON {
		if w := checkJSON(text); w != "" {
			doc.Warnings = append(doc.Warnings, w)
		}
	}
	return doc, nil
}

// checkJSON returns a warning when text is not valid JSON (or, for JSON
// Lines, when a line is not). The text is kept as it is either way.
func checkJSON(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if json.Valid([]byte(text)) {
		return ""
	}
	// JSON Lines: every non-empty line a JSON value.
	lines := strings.Split(text, "\n")
	bad := 0
	first := 0
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if !json.Valid([]byte(l)) {
			if bad == 0 {
				first = i + 1
			}
			bad++
		}
	}
	if bad == 0 {
		return ""
	}
	var raw json.RawMessage // checks syntax without building a tree
	err := json.Unmarshal([]byte(text), &raw)
	if len(lines) > 1 && bad < len(lines) {
		return fmt.Sprintf("not valid JSON (%v); as JSON Lines, %d lines are invalid, the first is line %d; kept as plain text", err, bad, first)
	}
	return fmt.Sprintf("not valid JSON (%v); kept as plain text", err)
}

// decodeText turns file bytes into UTF-8 text with "\n" line ends. It
// decodes UTF-16 (with a BOM, or plainly UTF-16 ASCII without one), refuses
// binary data, decodes legacy 8-bit text as Windows-1252 and repairs stray
// invalid UTF-8 with U+FFFD, saying what it did.
func decodeText(data []byte, lim documents.Limits) (string, []string, error) {
	var warnings []string
	switch {
	case bytes.HasPrefix(data, []byte("\xff\xfe\x00\x00")) || bytes.HasPrefix(data, []byte("\x00\x00\xfe\xff")):
		return "", nil, fmt.Errorf("%w: UTF-32 text is not supported; save it as UTF-8", documents.ErrUnsupported)
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		data = data[3:]
	case bytes.HasPrefix(data, []byte("\xff\xfe")):
		return decodeUTF16(data[2:], false, lim, nil)
	case bytes.HasPrefix(data, []byte("\xfe\xff")):
		return decodeUTF16(data[2:], true, lim, nil)
	default:
		if be, ok := sniffUTF16(data); ok {
			return decodeUTF16(data, be, lim, []string{"no byte-order mark; read as UTF-16 from its byte pattern"})
		}
	}

	// Binary data: NUL bytes early on, or many control characters.
	if i := bytes.IndexByte(data, 0); i >= 0 {
		nul := bytes.Count(data, []byte{0})
		if i < 8192 || nul*1000 > len(data) {
			return "", nil, fmt.Errorf("%w: it holds %d NUL bytes (the first at byte %d), so it is binary data, not text; was it renamed?", documents.ErrBinary, nul, i)
		}
		warnings = append(warnings, fmt.Sprintf("removed %d NUL bytes (the first at byte %d)", nul, i))
		data = bytes.ReplaceAll(data, []byte{0}, nil)
	}
	if ctl := countControls(data); ctl*20 > len(data) && ctl > 8 {
		return "", nil, fmt.Errorf("%w: %d of its %d bytes are control characters, so it is binary data, not text", documents.ErrBinary, ctl, len(data))
	}

	var text string
	if utf8.Valid(data) {
		text = string(data)
	} else {
		invalid, invalidBytes, multi, first := scanUTF8(data)
		switch {
		case invalidBytes*10 > len(data)*3:
			return "", nil, fmt.Errorf("%w: %d of its %d bytes are not valid UTF-8, so it is binary data, not text", documents.ErrBinary, invalidBytes, len(data))
		case multi == 0:
			// No valid multi-byte sequence at all: an 8-bit legacy encoding.
			text = decodeWindows1252(data)
			warnings = append(warnings, "not UTF-8; decoded as Windows-1252 (Western European)")
		default:
			text = strings.ToValidUTF8(string(data), "\uFFFD")
			warnings = append(warnings, fmt.Sprintf("%d invalid UTF-8 sequences replaced with U+FFFD (the first at byte %d)", invalid, first))
		}
	}
	text = normalizeNewlines(text)
	if len(text) > lim.MaxTextBytes {
		return "", nil, documents.TextTooLarge(len(text), lim)
	}
	return text, warnings, nil
}

// sniffUTF16 recognizes UTF-16 text without a BOM from the zero bytes of
// ASCII characters: nearly all odd bytes zero (little-endian) or all even
// ones (big-endian).
func sniffUTF16(data []byte) (bigEndian, ok bool) {
	n := len(data)
	if n > 4096 {
		n = 4096
	}
	n &^= 1
	if n < 8 {
		return false, false
	}
	var zeroEven, zeroOdd int
	for i := 0; i < n; i += 2 {
		if data[i] == 0 {
			zeroEven++
		}
		if data[i+1] == 0 {
			zeroOdd++
		}
	}
	pairs := n / 2
	switch {
	case zeroOdd*10 >= pairs*9 && zeroEven*10 <= pairs:
		return false, true
	case zeroEven*10 >= pairs*9 && zeroOdd*10 <= pairs:
		return true, true
	}
	return false, false
}

func decodeUTF16(data []byte, bigEndian bool, lim documents.Limits, warnings []string) (string, []string, error) {
	if len(data)%2 == 1 {
		warnings = append(warnings, "UTF-16 text with an odd number of bytes; the last byte was dropped")
		data = data[:len(data)-1]
	}
	u := make([]uint16, len(data)/2)
	for i := range u {
		if bigEndian {
			u[i] = uint16(data[2*i])<<8 | uint16(data[2*i+1])
		} else {
			u[i] = uint16(data[2*i+1])<<8 | uint16(data[2*i])
		}
	}
	runes := utf16.Decode(u)
	var b strings.Builder
	b.Grow(len(runes))
	nul, bad := 0, 0
	for _, r := range runes {
		switch {
		case r == 0:
			nul++
			continue
		case r == utf8.RuneError:
			bad++
		}
		b.WriteRune(r)
	}
	if nul*100 > len(runes)+100 {
		return "", nil, fmt.Errorf("%w: decoded as UTF-16 it holds %d NUL characters, so it is binary data", documents.ErrBinary, nul)
	}
	if nul > 0 {
		warnings = append(warnings, fmt.Sprintf("removed %d NUL characters", nul))
	}
	if bad > 0 {
		warnings = append(warnings, fmt.Sprintf("%d invalid UTF-16 sequences replaced with U+FFFD", bad))
	}
	text := normalizeNewlines(b.String())
	if len(text) > lim.MaxTextBytes {
		return "", nil, documents.TextTooLarge(len(text), lim)
	}
	return text, warnings, nil
}

// countControls counts C0 control bytes other than tab, newline, carriage
// return, form feed, vertical tab and escape.
func countControls(data []byte) int {
	n := 0
	for _, c := range data {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b {
			n++
		}
	}
	return n
}

// scanUTF8 counts invalid sequences (and their bytes) and valid multi-byte
// sequences, and finds the first invalid byte.
func scanUTF8(data []byte) (invalid, invalidBytes, multi, first int) {
	first = -1
	inBad := false
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			i++
			inBad = false
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			if first < 0 {
				first = i
			}
			if !inBad {
				invalid++
			}
			inBad = true
			invalidBytes++
			i++
			continue
		}
		inBad = false
		multi++
		i += size
	}
	return
}

func decodeWindows1252(data []byte) string {
	var b strings.Builder
	b.Grow(len(data) + len(data)/8)
	for _, c := range data {
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			continue
		}
		r := charmap.Windows1252.DecodeByte(c)
		b.WriteRune(r)
	}
	return b.String()
}

// normalizeNewlines turns "\r\n" and lone "\r" into "\n".
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}
