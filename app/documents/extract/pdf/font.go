package pdf

import (
	"errors"
	"sort"
	"strings"
	"unicode/utf16"
)

// pdfFont decodes the bytes of shown strings into text and glyph widths.
type pdfFont struct {
	name       string
	composite  bool             // Type0: multi-byte codes
	codespace  []codespaceRange // Type0 code lengths; empty means 2 bytes
	toUnicode  *cmapTable
	simple     [256]string // simple fonts: code -> text (from the encoding)
	hasSimple  bool
	widths     map[int]float64 // simple: code -> width; Type0: CID -> width
	cidRanges  []cidRange      // Type0 code -> CID from an embedded CMap (else identity)
	firstChar  int
	missing    float64 // default width, in glyph units (1/1000 em for most fonts)
	scale      float64 // glyph units to text space (0.001, or Type3's FontMatrix)
	std        *[95]int16
	ucs2       bool // a predefined Unicode CMap: codes are UTF-16BE
	noUnicode  bool // no way to map codes to text
	spaceWidth float64
}

type codespaceRange struct {
	n      int // bytes
	lo, hi uint32
}

type cidRange struct {
	n        int
	lo, hi   uint32
	cidStart int
}

// cmapTable is a parsed ToUnicode CMap.
type cmapTable struct {
	codespace []codespaceRange
	chars     map[uint64]string // (n<<32 | code) -> text
	ranges    []bfRange
}

type bfRange struct {
	n      int
	lo, hi uint32
	dst    []uint16 // UTF-16 of the first code's text; the last unit increments
	list   []string // or one text per code
}

// maxCMapEntries bounds the entries of a CMap.
const maxCMapEntries = 1 << 20

func (f *pdfFile) loadFont(v any) *pdfFont {
	fd := f.dict(v)
	font := &pdfFont{scale: 0.001, widths: map[int]float64{}}
	if fd == nil {
		font.simple = winAnsiText()
		font.hasSimple = true
		return font
	}
	subtype := asName(f.get(fd, "Subtype"))
	font.name = asName(f.get(fd, "BaseFont"))
	if tu, ok := f.get(fd, "ToUnicode").(*pdfStream); ok {
		if data, err := f.decodeStream(tu, true); err == nil || errors.Is(err, errStreamDamaged) {
			font.toUnicode = f.parseCMap(data)
		}
	}
	if subtype == "Type0" {
		f.loadType0(font, fd)
	} else {
		f.loadSimple(font, fd, subtype)
	}
	font.spaceWidth = font.width(32, 1)
	return font
}

func winAnsiText() [256]string {
	var t [256]string
	for c, n := range winAnsiEncoding {
		t[c] = glyphRunes(n)
	}
	return t
}

func (f *pdfFile) loadSimple(font *pdfFont, fd pdfDict, subtype string) {
	base := strings.TrimPrefix(font.name, font.name[:strings.IndexByte(font.name, '+')+1]) // "ABCDEF+Times" -> "Times"
	symbolic := strings.Contains(base, "Symbol") || strings.Contains(base, "Dingbats")
	var enc *[256]string
	var diffs pdfArray
	switch e := f.get(fd, "Encoding").(type) {
	case pdfName:
		enc = encodingsByName[string(e)]
	case pdfDict:
		enc = encodingsByName[asName(f.get(e, "BaseEncoding"))]
		diffs = f.array(e["Differences"])
	}
	if enc == nil {
		switch {
		case subtype == "TrueType" || symbolic:
			enc = &winAnsiEncoding
		default:
			enc = &standardEncoding
		}
	}
	names := *enc
	code := 0
	for _, d := range diffs {
		switch v := d.(type) {
		case int64:
			code = int(v)
		case float64:
			code = int(v)
		case pdfName:
			if code >= 0 && code < 256 {
				names[code] = string(v)
			}
			code++
		}
	}
	for c, n := range names {
		font.simple[c] = glyphRunes(n)
	}
	font.hasSimple = true
	if symbolic && font.toUnicode == nil && diffs == nil {
		font.noUnicode = true // Symbol/Dingbats glyphs without a map are not letters
	}

	if subtype == "Type3" {
		if m := f.array(fd["FontMatrix"]); len(m) >= 1 {
			if s, ok := f.num(m[0]); ok && s > 0 && s < 10 {
				font.scale = s
			}
		}
	}
	first, _ := f.num(fd["FirstChar"])
	font.firstChar = int(first)
	for i, w := range f.array(fd["Widths"]) {
		if i >= 256 {
			break
		}
		if v, ok := f.num(w); ok {
			font.widths[font.firstChar+i] = v
		}
	}
	if desc := f.dict(fd["FontDescriptor"]); desc != nil {
		if mw, ok := f.num(desc["MissingWidth"]); ok {
			font.missing = mw
		}
	}
	if len(font.widths) == 0 {
		lower := strings.ToLower(base)
		switch {
		case strings.Contains(lower, "courier"):
			font.missing = 600
		case strings.Contains(lower, "times"):
			font.std = &timesWidths
		default:
			font.std = &helveticaWidths
		}
	}
	if font.missing == 0 {
		font.missing = 500
	}
}

func (f *pdfFile) loadType0(font *pdfFont, fd pdfDict) {
	font.composite = true
	font.missing = 1000
	switch e := f.get(fd, "Encoding").(type) {
	case pdfName:
		name := string(e)
		switch {
		case name == "Identity-H" || name == "Identity-V":
		case strings.Contains(name, "UCS2") || strings.Contains(name, "UTF16"):
			font.ucs2 = true
		default:
			// Another predefined CMap (a CJK legacy encoding): without a
			// ToUnicode map the codes cannot be read as text.
			if font.toUnicode == nil {
				font.noUnicode = true
			}
		}
	case *pdfStream:
		if data, err := f.decodeStream(e, true); err == nil || errors.Is(err, errStreamDamaged) {
			cm := f.parseCMap(data)
			font.codespace = cm.codespace
			font.cidRanges = parseCIDRanges(data, f.objDepth())
		}
	}
	if font.codespace == nil && font.toUnicode != nil && !font.ucs2 {
		font.codespace = font.toUnicode.codespace
	}
	descs := f.array(fd["DescendantFonts"])
	if len(descs) == 0 {
		return
	}
	desc := f.dict(descs[0])
	if dw, ok := f.num(desc["DW"]); ok {
		font.missing = dw
	}
	w := f.array(desc["W"])
	entries := 0
	for i := 0; i < len(w) && entries < maxCMapEntries; {
		first, ok := f.num(w[i])
		if !ok {
			break
		}
		if i+1 < len(w) {
			if arr := f.array(w[i+1]); arr != nil {
				for k, x := range arr {
					if v, ok := f.num(x); ok {
						font.widths[int(first)+k] = v
						entries++
					}
				}
				i += 2
				continue
			}
		}
		if i+2 >= len(w) {
			break
		}
		last, ok1 := f.num(w[i+1])
		v, ok2 := f.num(w[i+2])
		if ok1 && ok2 && last >= first && last-first < 1<<16 {
			for c := int(first); c <= int(last) && entries < maxCMapEntries; c++ {
				font.widths[c] = v
				entries++
			}
		}
		i += 3
	}
	if font.toUnicode == nil && !font.ucs2 {
		font.noUnicode = true
	}
}

// glyph is one decoded code of a shown string.
type glyph struct {
	text  string
	width float64 // in text space units per unit font size (before Tfs)
	space bool    // the single-byte code 32, which word spacing applies to
}

// decode splits s into codes and reads each one.
func (font *pdfFont) decode(s string, out []glyph) []glyph {
	for len(s) > 0 {
		n := 1
		if font.composite {
			n = font.codeLen(s)
		}
		var code uint32
		for k := 0; k < n; k++ {
			code = code<<8 | uint32(s[k])
		}
		s = s[n:]
		g := glyph{width: font.width(code, n) * font.scale, space: n == 1 && code == 32}
		switch {
		case font.toUnicode != nil:
			if t, ok := font.toUnicode.lookup(code, n); ok {
				g.text = t
			} else if font.hasSimple && !font.noUnicode {
				g.text = font.simple[code&0xff]
			}
		case font.ucs2:
			g.text = string(utf16.Decode([]uint16{uint16(code)}))
		case font.hasSimple && !font.noUnicode:
			g.text = font.simple[code&0xff]
		}
		out = append(out, g)
	}
	return out
}

func (font *pdfFont) codeLen(s string) int {
	if len(font.codespace) == 0 {
		if len(s) >= 2 {
			return 2
		}
		return 1
	}
	for n := 1; n <= 4 && n <= len(s); n++ {
		var code uint32
		for k := 0; k < n; k++ {
			code = code<<8 | uint32(s[k])
		}
		for _, r := range font.codespace {
			if r.n == n && code >= r.lo && code <= r.hi {
				return n
			}
		}
	}
	// No range matches: take the shortest length the CMap uses.
	min := 4
	for _, r := range font.codespace {
		if r.n < min {
			min = r.n
		}
	}
	if min > len(s) {
		min = len(s)
	}
	return min
}

func (font *pdfFont) width(code uint32, n int) float64 {
	key := int(code)
	if font.composite {
		key = font.cid(code, n)
	}
	if w, ok := font.widths[key]; ok {
		return w
	}
	if font.std != nil && code >= 32 && code < 127 {
		return float64(font.std[code-32])
	}
	return font.missing
}

func (font *pdfFont) cid(code uint32, n int) int {
	for _, r := range font.cidRanges {
		if r.n == n && code >= r.lo && code <= r.hi {
			return r.cidStart + int(code-r.lo)
		}
	}
	return int(code)
}

func (t *cmapTable) lookup(code uint32, n int) (string, bool) {
	if s, ok := t.chars[uint64(n)<<32|uint64(code)]; ok {
		return s, true
	}
	i := sort.Search(len(t.ranges), func(i int) bool { return t.ranges[i].hi >= code })
	for ; i < len(t.ranges) && t.ranges[i].lo <= code; i++ {
		r := t.ranges[i]
		if r.n != n && n != 0 || code > r.hi {
			continue
		}
		off := int(code - r.lo)
		if r.list != nil {
			if off < len(r.list) {
				return r.list[off], true
			}
			return "", false
		}
		u := append([]uint16(nil), r.dst...)
		if len(u) == 0 {
			return "", false
		}
		u[len(u)-1] += uint16(off)
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// parseCMap reads codespace ranges and bfchar/bfrange mappings from a CMap
// program (only the parts text extraction needs).
func (f *pdfFile) parseCMap(data []byte) *cmapTable {
	t := &cmapTable{chars: map[uint64]string{}}
	l := &pdfLexer{b: data, maxDepth: 4}
	var stack []any
	entries := 0
	for entries < maxCMapEntries {
		tok, err := l.next()
		if err != nil {
			break
		}
		kw, isKw := tok.(pdfKeyword)
		if !isKw {
			if tok == delimArrayOpen || tok == delimDictOpen {
				if v, err := l.objectFrom(tok, 1); err == nil {
					stack = append(stack, v)
				}
				continue
			}
			if len(stack) < 1<<16 {
				stack = append(stack, tok)
			}
			continue
		}
		switch kw {
		case "begincodespacerange", "beginbfchar", "beginbfrange", "begincidrange", "begincidchar", "beginnotdefrange":
			stack = stack[:0]
		case "endcodespacerange":
			for i := 0; i+1 < len(stack); i += 2 {
				lo, ok1 := stack[i].(pdfString)
				hi, ok2 := stack[i+1].(pdfString)
				if ok1 && ok2 && len(lo) == len(hi) && len(lo) >= 1 && len(lo) <= 4 {
					t.codespace = append(t.codespace, codespaceRange{n: len(lo), lo: beUint(string(lo)), hi: beUint(string(hi))})
				}
			}
			stack = stack[:0]
		case "endbfchar":
			for i := 0; i+1 < len(stack); i += 2 {
				src, ok := stack[i].(pdfString)
				if !ok || len(src) == 0 || len(src) > 4 {
					continue
				}
				var text string
				switch d := stack[i+1].(type) {
				case pdfString:
					text = decodeUTF16BE([]byte(d))
				case pdfName:
					text = glyphRunes(string(d))
				}
				t.chars[uint64(len(src))<<32|uint64(beUint(string(src)))] = text
				entries++
			}
			stack = stack[:0]
		case "endbfrange":
			for i := 0; i+2 < len(stack); i += 3 {
				lo, ok1 := stack[i].(pdfString)
				hi, ok2 := stack[i+1].(pdfString)
				if !ok1 || !ok2 || len(lo) == 0 || len(lo) > 4 || len(hi) != len(lo) {
					continue
				}
				r := bfRange{n: len(lo), lo: beUint(string(lo)), hi: beUint(string(hi))}
				if r.hi < r.lo || r.hi-r.lo > 1<<16 {
					continue
				}
				switch d := stack[i+2].(type) {
				case pdfString:
					b := []byte(d)
					for k := 0; k+1 < len(b); k += 2 {
						r.dst = append(r.dst, uint16(b[k])<<8|uint16(b[k+1]))
					}
					if len(b) == 1 {
						r.dst = []uint16{uint16(b[0])}
					}
				case pdfArray:
					for _, x := range d {
						s, _ := x.(pdfString)
						r.list = append(r.list, decodeUTF16BE([]byte(s)))
					}
					if r.list == nil {
						r.list = []string{}
					}
				default:
					continue
				}
				t.ranges = append(t.ranges, r)
				entries += int(r.hi-r.lo) + 1
			}
			stack = stack[:0]
		case "endcidrange", "endcidchar", "endnotdefrange":
			stack = stack[:0]
		default:
			if len(stack) < 1<<16 {
				stack = append(stack, tok)
			}
		}
	}
	sort.SliceStable(t.ranges, func(i, j int) bool { return t.ranges[i].hi < t.ranges[j].hi })
	return t
}

// parseCIDRanges reads cidrange/cidchar mappings (code -> CID) of an
// embedded encoding CMap, for glyph widths.
func parseCIDRanges(data []byte, maxDepth int) []cidRange {
	l := &pdfLexer{b: data, maxDepth: maxDepth}
	var out []cidRange
	var stack []any
	for len(out) < maxCMapEntries {
		tok, err := l.next()
		if err != nil {
			break
		}
		switch tok {
		case pdfKeyword("begincidrange"), pdfKeyword("begincidchar"):
			stack = stack[:0]
		case pdfKeyword("endcidrange"):
			for i := 0; i+2 < len(stack); i += 3 {
				lo, ok1 := stack[i].(pdfString)
				hi, ok2 := stack[i+1].(pdfString)
				cid, ok3 := stack[i+2].(int64)
				if ok1 && ok2 && ok3 && len(lo) >= 1 && len(lo) <= 4 && len(lo) == len(hi) && cid >= 0 && cid < 1<<31 {
					out = append(out, cidRange{n: len(lo), lo: beUint(string(lo)), hi: beUint(string(hi)), cidStart: int(cid)})
				}
			}
			stack = stack[:0]
		case pdfKeyword("endcidchar"):
			for i := 0; i+1 < len(stack); i += 2 {
				src, ok1 := stack[i].(pdfString)
				cid, ok2 := stack[i+1].(int64)
				if ok1 && ok2 && len(src) >= 1 && len(src) <= 4 && cid >= 0 && cid < 1<<31 {
					c := beUint(string(src))
					out = append(out, cidRange{n: len(src), lo: c, hi: c, cidStart: int(cid)})
				}
			}
			stack = stack[:0]
		default:
			if len(stack) < 1<<16 {
				stack = append(stack, tok)
			}
		}
	}
	return out
}

func beUint(s string) uint32 {
	var v uint32
	for i := 0; i < len(s); i++ {
		v = v<<8 | uint32(s[i])
	}
	return v
}

// decodeUTF16BE decodes big-endian UTF-16 (a ToUnicode destination).
func decodeUTF16BE(b []byte) string {
	if len(b) == 1 {
		return string(rune(b[0]))
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	return string(utf16.Decode(u))
}
