package pdf

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// Glyph names (Adobe Glyph List) for the characters PDF simple-font
// encodings use. Names outside this table are read by the AGL rules
// (uniXXXX, uXXXX[XX], ligatures a_b, suffixes .sc) in glyphRunes.
var glyphNames = func() map[string]string {
	m := map[string]string{}
	// ASCII 0x20..0x7E in order.
	ascii := strings.Fields(`space exclam quotedbl numbersign dollar percent ampersand quotesingle
		parenleft parenright asterisk plus comma hyphen period slash zero one two three four five six
		seven eight nine colon semicolon less equal greater question at A B C D E F G H I J K L M N O P
		Q R S T U V W X Y Z bracketleft backslash bracketright asciicircum underscore grave a b c d e f
		g h i j k l m n o p q r s t u v w x y z braceleft bar braceright asciitilde`)
	for i, n := range ascii {
		m[n] = string(rune(0x20 + i))
	}
	// Latin-1 0xA0..0xFF in order.
	latin1 := strings.Fields(`nbspace exclamdown cent sterling currency yen brokenbar section dieresis
		copyright ordfeminine guillemotleft logicalnot softhyphen registered macron degree plusminus
		twosuperior threesuperior acute mu paragraph periodcentered cedilla onesuperior ordmasculine
		guillemotright onequarter onehalf threequarters questiondown Agrave Aacute Acircumflex Atilde
		Adieresis Aring AE Ccedilla Egrave Eacute Ecircumflex Edieresis Igrave Iacute Icircumflex
		Idieresis Eth Ntilde Ograve Oacute Ocircumflex Otilde Odieresis multiply Oslash Ugrave Uacute
		Ucircumflex Udieresis Yacute Thorn germandbls agrave aacute acircumflex atilde adieresis aring
		ae ccedilla egrave eacute ecircumflex edieresis igrave iacute icircumflex idieresis eth ntilde
		ograve oacute ocircumflex otilde odieresis divide oslash ugrave uacute ucircumflex udieresis
		yacute thorn ydieresis`)
	for i, n := range latin1 {
		m[n] = string(rune(0xA0 + i))
	}
	for n, r := range map[string]rune{
		"Euro": '€', "quotesinglbase": '‚', "florin": 'ƒ', "quotedblbase": '„', "ellipsis": '…',
		"dagger": '†', "daggerdbl": '‡', "circumflex": 'ˆ', "perthousand": '‰', "Scaron": 'Š',
		"guilsinglleft": '‹', "OE": 'Œ', "Zcaron": 'Ž', "quoteleft": '‘', "quoteright": '’',
		"quotedblleft": '“', "quotedblright": '”', "bullet": '•', "endash": '–', "emdash": '—',
		"tilde": '˜', "trademark": '™', "scaron": 'š', "guilsinglright": '›', "oe": 'œ', "zcaron": 'ž',
		"Ydieresis": 'Ÿ', "dotlessi": 'ı', "Lslash": 'Ł', "lslash": 'ł', "fraction": '⁄',
		"ring": '˚', "caron": 'ˇ', "ogonek": '˛', "hungarumlaut": '˝', "dotaccent": '˙', "breve": '˘',
		"minus": '−', "space.nbsp": '\u00a0', "nonbreakingspace": '\u00a0', "sfthyphen": '\u00ad',
		"Delta": 'Δ', "Omega": 'Ω', "mu1": 'µ', "pi": 'π', "Pi": 'Π', "Sigma": 'Σ', "summation": '∑',
		"product": '∏', "radical": '√', "infinity": '∞', "integral": '∫', "approxequal": '≈',
		"notequal": '≠', "lessequal": '≤', "greaterequal": '≥', "partialdiff": '∂', "lozenge": '◊',
		"apple": '\uf8ff', "alpha": 'α', "beta": 'β', "gamma": 'γ', "delta": 'δ', "epsilon": 'ε',
		"lambda": 'λ', "sigma": 'σ', "theta": 'θ', "omega": 'ω', "arrowright": '→', "arrowleft": '←',
		"arrowup": '↑', "arrowdown": '↓', "arrowboth": '↔', "checkmark": '✓', "copyrightserif": '©',
		"registerserif": '®', "trademarkserif": '™', "onethird": '⅓', "twothirds": '⅔',
		"figuredash": '‒', "quotereversed": '‛', "middot": '·', "Gbreve": 'Ğ', "gbreve": 'ğ',
		"Idotaccent": 'İ', "Scedilla": 'Ş', "scedilla": 'ş', "Cacute": 'Ć', "cacute": 'ć',
		"Ccaron": 'Č', "ccaron": 'č', "Dcroat": 'Đ', "dcroat": 'đ', "Ecaron": 'Ě', "ecaron": 'ě',
		"Nacute": 'Ń', "nacute": 'ń', "Ncaron": 'Ň', "ncaron": 'ň', "Rcaron": 'Ř', "rcaron": 'ř',
		"Sacute": 'Ś', "sacute": 'ś', "Tcaron": 'Ť', "tcaron": 'ť', "Uring": 'Ů', "uring": 'ů',
		"Zacute": 'Ź', "zacute": 'ź', "Zdotaccent": 'Ż', "zdotaccent": 'ż', "Aogonek": 'Ą',
		"aogonek": 'ą', "Eogonek": 'Ę', "eogonek": 'ę', "Ohungarumlaut": 'Ő', "ohungarumlaut": 'ő',
		"Uhungarumlaut": 'Ű', "uhungarumlaut": 'ű', "Amacron": 'Ā', "amacron": 'ā', "Emacron": 'Ē',
		"emacron": 'ē', "Imacron": 'Ī', "imacron": 'ī', "Omacron": 'Ō', "omacron": 'ō',
		"Umacron": 'Ū', "umacron": 'ū', "Lcaron": 'Ľ', "lcaron": 'ľ', "Lacute": 'Ĺ', "lacute": 'ĺ',
		"Racute": 'Ŕ', "racute": 'ŕ', "Abreve": 'Ă', "abreve": 'ă', "Tcommaaccent": 'Ț',
		"tcommaaccent": 'ț', "Scommaaccent": 'Ș', "scommaaccent": 'ș', "Edotaccent": 'Ė',
		"edotaccent": 'ė', "Iogonek": 'Į', "iogonek": 'į', "Uogonek": 'Ų', "uogonek": 'ų',
		"commaaccent": '\uf6c3', "dcaron": 'ď', "Dcaron": 'Ď', "Gcommaaccent": 'Ģ',
		"gcommaaccent": 'ģ', "Kcommaaccent": 'Ķ', "kcommaaccent": 'ķ', "Lcommaaccent": 'Ļ',
		"lcommaaccent": 'ļ', "Ncommaaccent": 'Ņ', "ncommaaccent": 'ņ', "Rcommaaccent": 'Ŗ',
		"rcommaaccent": 'ŗ', "Tcedilla": 'Ţ', "tcedilla": 'ţ', "increment": '∆', "Ohm": 'Ω',
		"periodcentered.loclCAT": '·', "hyphen.case": '-', "openbullet": '◦', "cent.oldstyle": '¢',
	} {
		m[n] = string(r)
	}
	for n, s := range map[string]string{
		"fi": "fi", "fl": "fl", "ff": "ff", "ffi": "ffi", "ffl": "ffl", "st": "st",
	} {
		m[n] = s
	}
	return m
}()

// glyphRunes reads a glyph name as text by the AGL rules; "" when unknown
// (names like "g123" or "cid42" carry no meaning).
func glyphRunes(name string) string {
	if s, ok := glyphNames[name]; ok {
		return s
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i] // "a.sc", "one.oldstyle"
		if s, ok := glyphNames[name]; ok {
			return s
		}
	} else if i == 0 {
		return ""
	}
	if strings.Contains(name, "_") { // ligature of components: "f_f_i"
		var b strings.Builder
		for _, part := range strings.Split(name, "_") {
			s := glyphRunes(part)
			if s == "" {
				return ""
			}
			b.WriteString(s)
		}
		return b.String()
	}
	if hex, ok := strings.CutPrefix(name, "uni"); ok && len(hex) >= 4 && len(hex)%4 == 0 {
		var b strings.Builder
		for i := 0; i < len(hex); i += 4 {
			v, err := strconv.ParseUint(hex[i:i+4], 16, 16)
			if err != nil || (v >= 0xD800 && v < 0xE000) {
				return ""
			}
			b.WriteRune(rune(v))
		}
		return b.String()
	}
	if hex, ok := strings.CutPrefix(name, "u"); ok && len(hex) >= 4 && len(hex) <= 6 {
		v, err := strconv.ParseUint(hex, 16, 32)
		if err == nil && v <= utf8.MaxRune && !(v >= 0xD800 && v < 0xE000) {
			return string(rune(v))
		}
	}
	return ""
}

// Base encodings of simple fonts: code -> glyph name.
var (
	standardEncoding  [256]string
	winAnsiEncoding   [256]string
	macRomanEncoding  [256]string
	pdfDocEncodingHi  [256]rune // only for text strings (titles)
	runeToGlyphName   = map[string]string{}
	encodingsByName   = map[string]*[256]string{}
	standardUpperHalf = map[int]string{
		0xA1: "exclamdown", 0xA2: "cent", 0xA3: "sterling", 0xA4: "fraction", 0xA5: "yen",
		0xA6: "florin", 0xA7: "section", 0xA8: "currency", 0xA9: "quotesingle",
		0xAA: "quotedblleft", 0xAB: "guillemotleft", 0xAC: "guilsinglleft", 0xAD: "guilsinglright",
		0xAE: "fi", 0xAF: "fl", 0xB1: "endash", 0xB2: "dagger", 0xB3: "daggerdbl",
		0xB4: "periodcentered", 0xB6: "paragraph", 0xB7: "bullet", 0xB8: "quotesinglbase",
		0xB9: "quotedblbase", 0xBA: "quotedblright", 0xBB: "guillemotright", 0xBC: "ellipsis",
		0xBD: "perthousand", 0xBF: "questiondown", 0xC1: "grave", 0xC2: "acute", 0xC3: "circumflex",
		0xC4: "tilde", 0xC5: "macron", 0xC6: "breve", 0xC7: "dotaccent", 0xC8: "dieresis",
		0xCA: "ring", 0xCB: "cedilla", 0xCD: "hungarumlaut", 0xCE: "ogonek", 0xCF: "caron",
		0xD0: "emdash", 0xE1: "AE", 0xE3: "ordfeminine", 0xE8: "Lslash", 0xE9: "Oslash", 0xEA: "OE",
		0xEB: "ordmasculine", 0xF1: "ae", 0xF5: "dotlessi", 0xF8: "lslash", 0xF9: "oslash",
		0xFA: "oe", 0xFB: "germandbls",
	}
)

func init() {
	for n, s := range glyphNames {
		if _, ok := runeToGlyphName[s]; !ok || len(n) < len(runeToGlyphName[s]) {
			runeToGlyphName[s] = n
		}
	}
	// Prefer the canonical names where several names share a character.
	for _, n := range []string{"hyphen", "space", "quotesingle", "grave", "mu", "Omega", "Delta", "periodcentered"} {
		runeToGlyphName[glyphNames[n]] = n
	}
	nameOf := func(r rune) string {
		if r == 0xFFFD || r < 0x20 {
			return ""
		}
		return runeToGlyphName[string(r)]
	}
	for c := 0x20; c < 0x7F; c++ {
		standardEncoding[c] = nameOf(rune(c))
	}
	standardEncoding[0x27] = "quoteright"
	standardEncoding[0x60] = "quoteleft"
	for c, n := range standardUpperHalf {
		standardEncoding[c] = n
	}
	for c := 0x20; c < 0x100; c++ {
		if c < 0x80 {
			winAnsiEncoding[c] = nameOf(rune(c))
			macRomanEncoding[c] = nameOf(rune(c))
			continue
		}
		winAnsiEncoding[c] = nameOf(charmap.Windows1252.DecodeByte(byte(c)))
		macRomanEncoding[c] = nameOf(charmap.Macintosh.DecodeByte(byte(c)))
	}
	winAnsiEncoding[0xA0] = "space"
	winAnsiEncoding[0xAD] = "hyphen"
	encodingsByName["StandardEncoding"] = &standardEncoding
	encodingsByName["WinAnsiEncoding"] = &winAnsiEncoding
	encodingsByName["MacRomanEncoding"] = &macRomanEncoding
	encodingsByName["MacExpertEncoding"] = &standardEncoding // rare; at least not garbage for ASCII
	for c := range pdfDocEncodingHi {
		pdfDocEncodingHi[c] = rune(c)
	}
	for c, r := range map[int]rune{
		0x80: '•', 0x81: '†', 0x82: '‡', 0x83: '…', 0x84: '—', 0x85: '–', 0x86: 'ƒ', 0x87: '⁄',
		0x88: '‹', 0x89: '›', 0x8A: '−', 0x8B: '‰', 0x8C: '„', 0x8D: '“', 0x8E: '”', 0x8F: '‘',
		0x90: '’', 0x91: '‚', 0x92: '™', 0x93: 'ﬁ', 0x94: 'ﬂ', 0x95: 'Ł', 0x96: 'Œ', 0x97: 'Š',
		0x98: 'Ÿ', 0x99: 'Ž', 0x9A: 'ı', 0x9B: 'ł', 0x9C: 'œ', 0x9D: 'š', 0x9E: 'ž', 0xA0: '€',
	} {
		pdfDocEncodingHi[c] = r
	}
}

// pdfTextString decodes a PDF "text string" (titles, bookmarks): UTF-16BE
// with a BOM, UTF-8 with a BOM, else PDFDocEncoding.
func pdfTextString(s string) string {
	switch {
	case strings.HasPrefix(s, "\xfe\xff"):
		return decodeUTF16BE([]byte(s[2:]))
	case strings.HasPrefix(s, "\xef\xbb\xbf"):
		return strings.ToValidUTF8(s[3:], "\uFFFD")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(pdfDocEncodingHi[s[i]])
	}
	return b.String()
}

// Widths of the standard 14 fonts for ASCII 0x20..0x7E (in 1/1000 em), used
// when a font has no /Widths: they decide where spaces between words go.
var (
	helveticaWidths = [95]int16{
		278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
		556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
		1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
		667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
		333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
		556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
	}
	timesWidths = [95]int16{
		250, 333, 408, 500, 500, 833, 778, 180, 333, 333, 500, 564, 250, 333, 250, 278,
		500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 278, 278, 564, 564, 564, 444,
		921, 722, 667, 667, 722, 611, 556, 722, 722, 333, 389, 722, 611, 889, 722, 722,
		556, 722, 667, 556, 611, 722, 722, 944, 722, 722, 611, 333, 278, 333, 469, 500,
		333, 444, 500, 444, 500, 444, 333, 500, 500, 278, 278, 500, 278, 778, 500, 500,
		500, 500, 333, 389, 278, 500, 500, 722, 500, 500, 444, 480, 200, 480, 541,
	}
)
