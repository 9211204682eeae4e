package pdf

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"nibble/app/documents"
)

// maxFormDepth bounds Form XObjects drawn inside Form XObjects.
const maxFormDepth = 12

// maxOperands bounds the operand stack of a content stream.
const maxOperands = 1 << 16

// extract reads the text of every page.
func extract(data []byte, lim documents.Limits) (*documents.Document, error) {
	f, err := openPDF(data, lim)
	if err != nil {
		return nil, err
	}
	pages, expected, err := f.pageList()
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		if f.truncated {
			return nil, fmt.Errorf("%w: the PDF is truncated (it has no %%%%EOF) and none of its pages could be read", documents.ErrDamaged)
		}
		return nil, fmt.Errorf("%w: the PDF has no pages that could be read", documents.ErrDamaged)
	}
	doc := &documents.Document{}
	if info := f.dict(f.trailer["Info"]); info != nil {
		if t := stringOf(f.get(info, "Title")); t != "" {
			doc.Title = strings.Join(strings.Fields(cleanText(pdfTextString(t))), " ")
		}
	}
	var (
		b           strings.Builder
		noText      []int // pages without text
		imageOnly   int   // of those, pages that draw images
		damaged     []int
		unmapped    []int
		repeats     []int
		fontWarns   = map[string]bool{}
		fontWarning []string
	)
	for i, pg := range pages {
		num := i + 1
		x := &textExtractor{f: f, fonts: map[any]*pdfFont{}}
		perr := x.page(pg)
		if perr != nil {
			if errors.Is(perr, documents.ErrLimit) || errors.Is(perr, documents.ErrTooLarge) {
				return nil, fmt.Errorf("page %d: %w", num, perr)
			}
			damaged = append(damaged, num)
		}
		text := x.text()
		if x.skipped > 0 {
			repeats = append(repeats, num)
		}
		if x.unmapped > 0 && x.unmapped*4 > x.glyphs {
			unmapped = append(unmapped, num)
		}
		for _, name := range x.badFonts {
			if !fontWarns[name] && len(fontWarning) < 5 {
				fontWarns[name] = true
				fontWarning = append(fontWarning, name)
			}
		}
		if text == "" {
			noText = append(noText, num)
			if x.images > 0 {
				imageOnly++
			}
			doc.Pages = append(doc.Pages, documents.PageSpan{Number: num, Start: b.Len(), End: b.Len()})
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		start := b.Len()
		b.WriteString(text)
		if b.Len() > lim.MaxTextBytes {
			return nil, fmt.Errorf("%w: its text passed the %s limit for documents at page %d of %d", documents.ErrTooLarge, documents.HumanBytes(int64(lim.MaxTextBytes)), num, len(pages))
		}
		doc.Pages = append(doc.Pages, documents.PageSpan{Number: num, Start: start, End: b.Len()})
	}
	text := b.String()
	doc.Text = text
	if strings.TrimSpace(text) == "" {
		switch {
		case imageOnly > 0:
			return nil, fmt.Errorf("%w: the PDF (%s) has no text layer, only images: it looks like a scan. Nibble cannot read text from images yet; run OCR on it first (for example, open it in Preview and use Live Text, or export it with OCR)", documents.ErrNoText, plural(len(pages), "page"))
		case len(unmapped) > 0:
			return nil, fmt.Errorf("%w: the PDF's fonts have no mapping to Unicode, so its text cannot be read (the characters are glyph numbers only)", documents.ErrNoText)
		default:
			return nil, fmt.Errorf("%w: the PDF (%s) has no extractable text", documents.ErrNoText, plural(len(pages), "page"))
		}
	}
	if f.crypt != nil {
		doc.Warnings = append(doc.Warnings, "the PDF is encrypted with an empty user password (permissions only); it was decrypted to read its text")
	}
	if f.truncated {
		doc.Warnings = append(doc.Warnings, "the PDF appears truncated (no %%EOF at its end, e.g. an incomplete download); text from the missing part is not included")
	} else if f.rebuilt {
		doc.Warnings = append(doc.Warnings, "the PDF's cross-reference table was damaged and was rebuilt by scanning the file; some text may be missing")
	}
	if expected > len(pages) {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("the PDF says it has %d pages but only %d could be read", expected, len(pages)))
	}
	if len(noText) > 0 {
		w := fmt.Sprintf("%s without text", pageList(noText))
		if imageOnly > 0 {
			w += fmt.Sprintf(" (%d of them only images: scanned pages? their text is not included)", imageOnly)
		}
		doc.Warnings = append(doc.Warnings, w)
	}
	if len(damaged) > 0 {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("%s damaged: their text may be incomplete", pageList(damaged)))
	}
	if len(repeats) > 0 {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("%s draw the same form more than %d times; the repeats were skipped", pageList(repeats), maxFormDraws))
	}
	if len(unmapped) > 0 {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("%s use fonts without a Unicode mapping; text in those fonts is missing", pageList(unmapped)))
	}
	if len(fontWarning) > 0 && len(unmapped) == 0 {
		doc.Warnings = append(doc.Warnings, fmt.Sprintf("some text in fonts without a Unicode mapping (%s) is missing", strings.Join(fontWarning, ", ")))
	}
	return doc, nil
}

// plural writes "1 page", "3 pages".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// pageList formats page numbers as "page 3" or "pages 2, 5–9, 12".
func pageList(nums []int) string {
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", nums[i], nums[j]))
		} else {
			parts = append(parts, fmt.Sprint(nums[i]))
		}
		i = j + 1
		if len(parts) == 20 && i < len(nums) {
			parts = append(parts, fmt.Sprintf("and %d more", len(nums)-i))
			break
		}
	}
	if len(nums) == 1 {
		return "page " + parts[0]
	}
	return "pages " + strings.Join(parts, ", ")
}

type pdfPage struct {
	dict      pdfDict
	resources pdfDict
}

// pageList walks the page tree (cycle-checked, depth-bounded) and returns the
// pages in order and the count the tree claims.
func (f *pdfFile) pageList() ([]pdfPage, int, error) {
	root := f.dict(f.trailer["Root"])
	top := dictGet(root, "Pages")
	expected := 0
	if d := f.dict(top); d != nil {
		if n, ok := f.num(d["Count"]); ok && n > 0 && n < 1e9 {
			expected = int(n)
		}
	}
	var pages []pdfPage
	seen := map[int]bool{}
	var walk func(node any, res pdfDict, depth int) error
	walk = func(node any, res pdfDict, depth int) error {
		if depth > 64 {
			return nil
		}
		if r, ok := node.(pdfRef); ok {
			if seen[r.num] {
				return nil // a cycle, or a page listed twice
			}
			seen[r.num] = true
		}
		d := f.dict(node)
		if d == nil {
			return nil
		}
		if r := f.dict(d["Resources"]); r != nil {
			res = r
		}
		kids, hasKids := f.get(d, "Kids").(pdfArray)
		if typ := asName(f.get(d, "Type")); typ == "Page" || (!hasKids && typ != "Pages") {
			if len(pages) >= f.lim.MaxPages {
				return fmt.Errorf("%w: the PDF has more than %d pages", documents.ErrTooLarge, f.lim.MaxPages)
			}
			pages = append(pages, pdfPage{dict: d, resources: res})
			return nil
		}
		for _, k := range kids {
			if err := walk(k, res, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top, nil, 0); err != nil {
		return nil, 0, err
	}
	return pages, expected, nil
}

// textExtractor interprets one page's content streams.
type textExtractor struct {
	f     *pdfFile
	fonts map[any]*pdfFont
	out   strings.Builder

	// Where the last shown text ended, in device space, and its size.
	lastX, lastY, lastSize float64
	haveLast               bool

	images   int
	glyphs   int
	unmapped int
	badFonts []string
	glyphBuf []glyph
	draws    map[int]int // Form XObject -> times drawn on this page
	skipped  int         // form draws skipped as repeats
	err      error       // a limit hit while showing text
}

// maxFormDraws bounds how often one Form XObject is drawn on a page; more
// repeats (a pattern, or an attack) are skipped.
const maxFormDraws = 100

type matrix [6]float64

var identity = matrix{1, 0, 0, 1, 0, 0}

// mul is m × n (apply m, then n).
func (m matrix) mul(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

type gstate struct {
	ctm                      matrix
	font                     *pdfFont
	size, tc, tw, th, tl, ts float64
}

func (x *textExtractor) page(p pdfPage) error {
	contents, err := x.f.resolve(dictGet(p.dict, "Contents"))
	if err != nil {
		return err
	}
	var data []byte
	var damaged error
	switch c := contents.(type) {
	case *pdfStream:
		data, damaged = x.f.decodeStream(c, true)
	case pdfArray:
		for _, part := range c {
			s, err := x.f.resolve(part)
			if err != nil {
				damaged = err
				continue
			}
			if st, ok := s.(*pdfStream); ok {
				d, err := x.f.decodeStream(st, true)
				if err != nil {
					if errors.Is(err, documents.ErrLimit) {
						return err
					}
					damaged = err
				}
				data = append(data, d...)
				data = append(data, '\n')
			}
		}
	}
	if damaged != nil && errors.Is(damaged, documents.ErrLimit) {
		return damaged
	}
	st := &gstate{ctm: identity, th: 1}
	if err := x.run(data, p.resources, st, 0, map[int]bool{}); err != nil {
		return err
	}
	return damaged
}

// run interprets a content stream.
func (x *textExtractor) run(data []byte, res pdfDict, st *gstate, depth int, forms map[int]bool) error {
	if !x.f.budget.Charge(int64(len(data))) { // interpreting costs like inflating: bounds repeated forms
		return fmt.Errorf("%w: content streams passed the %s limit (forms drawn over and over?)", documents.ErrLimit, documents.HumanBytes(x.f.lim.MaxInflatedBytes))
	}
	l := &pdfLexer{b: data, maxDepth: x.f.objDepth()}
	var ops []any
	var stack []gstate
	tm, tlm := identity, identity
	var fontsRes pdfDict
	if res != nil {
		fontsRes = x.f.dict(res["Font"])
	}
	for {
		if x.err != nil {
			return x.err
		}
		tok, err := l.next()
		if err != nil {
			if errors.Is(err, errPDFEOF) {
				return nil
			}
			// Skip the bad byte and go on: a damaged stream still has text.
			l.pos++
			ops = ops[:0]
			continue
		}
		kw, isOp := tok.(pdfKeyword)
		if !isOp {
			v, err := l.objectFrom(tok, 0)
			if err != nil {
				if errors.Is(err, documents.ErrLimit) {
					return err
				}
				ops = ops[:0]
				continue
			}
			if len(ops) >= maxOperands {
				return fmt.Errorf("%w: more than %d operands in a content stream", documents.ErrLimit, maxOperands)
			}
			ops = append(ops, v)
			continue
		}
		num := func(i int) float64 {
			if i < len(ops) {
				v, _ := asFloat(ops[i])
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return 0
				}
				return v
			}
			return 0
		}
		switch kw {
		case "q":
			if len(stack) < 256 {
				stack = append(stack, *st)
			}
		case "Q":
			if n := len(stack); n > 0 {
				*st = stack[n-1]
				stack = stack[:n-1]
			}
		case "cm":
			if len(ops) >= 6 {
				st.ctm = matrix{num(0), num(1), num(2), num(3), num(4), num(5)}.mul(st.ctm)
			}
		case "BT":
			tm, tlm = identity, identity
		case "Tf":
			if len(ops) >= 2 {
				st.font = x.font(fontsRes, asName(ops[0]))
				st.size = num(1)
			}
		case "Tc":
			st.tc = num(0)
		case "Tw":
			st.tw = num(0)
		case "Tz":
			st.th = num(0) / 100
		case "TL":
			st.tl = num(0)
		case "Ts":
			st.ts = num(0)
		case "Td", "TD":
			if len(ops) >= 2 {
				if kw == "TD" {
					st.tl = -num(1)
				}
				tlm = matrix{1, 0, 0, 1, num(0), num(1)}.mul(tlm)
				tm = tlm
			}
		case "Tm":
			if len(ops) >= 6 {
				tlm = matrix{num(0), num(1), num(2), num(3), num(4), num(5)}
				tm = tlm
			}
		case "T*":
			tlm = matrix{1, 0, 0, 1, 0, -st.tl}.mul(tlm)
			tm = tlm
		case "Tj":
			if len(ops) >= 1 {
				x.show(st, &tm, ops[len(ops)-1])
			}
		case "'", "\"":
			if kw == "\"" && len(ops) >= 3 {
				st.tw, st.tc = num(0), num(1)
			}
			tlm = matrix{1, 0, 0, 1, 0, -st.tl}.mul(tlm)
			tm = tlm
			if len(ops) >= 1 {
				x.show(st, &tm, ops[len(ops)-1])
			}
		case "TJ":
			if len(ops) >= 1 {
				if arr, ok := ops[len(ops)-1].(pdfArray); ok {
					for _, e := range arr {
						switch v := e.(type) {
						case pdfString:
							x.show(st, &tm, v)
						case int64, float64:
							adj, _ := asFloat(v)
							tx := -adj / 1000 * st.size * st.th
							tm = matrix{1, 0, 0, 1, tx, 0}.mul(tm)
						}
					}
				}
			}
		case "Do":
			if len(ops) >= 1 && res != nil {
				if err := x.doXObject(res, asName(ops[0]), st, depth, forms); err != nil {
					return err
				}
			}
		case "BI":
			x.images++
			// Skip the inline image's dictionary and data: "ID <data> EI".
			id := findKeyword(data, "ID", l.pos)
			if id < 0 {
				return nil
			}
			ei := id + 3
			for {
				k := findKeyword(data, "EI", ei)
				if k < 0 {
					return nil
				}
				ei = k + 2
				if k > 0 && isPDFSpace(data[k-1]) {
					break
				}
			}
			l.pos = ei
		}
		ops = ops[:0]
	}
}

func (x *textExtractor) font(fontsRes pdfDict, name string) *pdfFont {
	v := dictGet(fontsRes, name)
	key := any(v)
	if r, ok := v.(pdfRef); ok {
		key = r.num
	} else {
		key = "inline:" + name
	}
	if font, ok := x.fonts[key]; ok {
		return font
	}
	font := x.f.loadFont(v)
	x.fonts[key] = font
	return font
}

func (x *textExtractor) doXObject(res pdfDict, name string, st *gstate, depth int, forms map[int]bool) error {
	xobjs := x.f.dict(res["XObject"])
	ref, isRef := dictGet(xobjs, name).(pdfRef)
	obj, err := x.f.resolve(dictGet(xobjs, name))
	if err != nil {
		return nil
	}
	s, ok := obj.(*pdfStream)
	if !ok {
		return nil
	}
	switch asName(x.f.get(s.dict, "Subtype")) {
	case "Image":
		x.images++
		return nil
	case "Form":
	default:
		return nil
	}
	if depth >= maxFormDepth || (isRef && forms[ref.num]) {
		return nil
	}
	if isRef {
		if x.draws == nil {
			x.draws = map[int]int{}
		}
		if x.draws[ref.num] >= maxFormDraws {
			x.skipped++
			return nil
		}
		x.draws[ref.num]++
	}
	data, err := x.f.decodeStream(s, true)
	if err != nil && !errors.Is(err, errStreamDamaged) {
		if errors.Is(err, documents.ErrLimit) {
			return err
		}
		return nil
	}
	inner := *st
	if m := x.f.array(s.dict["Matrix"]); len(m) == 6 {
		var fm matrix
		for i := range fm {
			fm[i], _ = x.f.num(m[i])
		}
		inner.ctm = fm.mul(st.ctm)
	}
	formRes := x.f.dict(s.dict["Resources"])
	if formRes == nil {
		formRes = res
	}
	if isRef {
		forms[ref.num] = true
		defer delete(forms, ref.num)
	}
	return x.run(data, formRes, &inner, depth+1, forms)
}

// show places the text of one string, deciding from positions whether a
// space or a line break separates it from the text before.
func (x *textExtractor) show(st *gstate, tm *matrix, v any) {
	s, ok := v.(pdfString)
	if !ok || st.font == nil && len(s) == 0 {
		return
	}
	font := st.font
	if font == nil {
		font = x.f.loadFont(nil)
		st.font = font
	}
	glyphs := font.decode(string(s), x.glyphBuf[:0])
	x.glyphBuf = glyphs
	if len(glyphs) == 0 {
		return
	}
	trm := matrix{st.size * st.th, 0, 0, st.size, 0, st.ts}.mul(*tm).mul(st.ctm)
	x0, y0 := trm[4], trm[5]
	size := math.Hypot(trm[2], trm[3])
	if size < 0.01 || math.IsNaN(size) || math.IsInf(size, 0) {
		size = 1
	}
	var text strings.Builder
	for _, g := range glyphs {
		x.glyphs++
		if g.text == "" {
			x.unmapped++
			if font.noUnicode && len(x.badFonts) < 5 && !contains(x.badFonts, font.name) {
				x.badFonts = append(x.badFonts, font.name)
			}
		}
		text.WriteString(g.text)
		adv := g.width*st.size + st.tc
		if g.space {
			adv += st.tw
		}
		*tm = matrix{1, 0, 0, 1, adv * st.th, 0}.mul(*tm)
	}
	end := matrix{st.size * st.th, 0, 0, st.size, 0, st.ts}.mul(*tm).mul(st.ctm)
	x.emit(cleanText(text.String()), x0, y0, end[4], end[5], size, trm)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// emit appends a run of text that starts at (x0, y0) and ends at (x1, y1).
func (x *textExtractor) emit(t string, x0, y0, x1, y1, size float64, trm matrix) {
	if t == "" {
		return
	}
	if x.haveLast {
		// Distances in the text's own direction: project onto its axes.
		ux, uy := trm[0], trm[1]
		n := math.Hypot(ux, uy)
		if n == 0 || math.IsNaN(n) {
			ux, uy, n = 1, 0, 1
		}
		ux, uy = ux/n, uy/n
		dx, dy := x0-x.lastX, y0-x.lastY
		along := dx*ux + dy*uy
		across := -dx*uy + dy*ux
		ref := math.Max(size, x.lastSize)
		switch {
		case math.Abs(across) > 0.6*ref:
			if across < -2.0*ref || across > 0 {
				x.write("\n\n")
			} else {
				x.write("\n")
			}
		case along > 0.15*ref || along < -0.6*ref:
			if !endsWithSpace(&x.out) && !strings.HasPrefix(t, " ") {
				x.write(" ")
			}
		}
	}
	x.write(t)
	x.lastX, x.lastY, x.lastSize, x.haveLast = x1, y1, size, true
}

func (x *textExtractor) write(s string) {
	if x.out.Len() == 0 && strings.TrimSpace(s) == "" {
		return
	}
	x.out.WriteString(s)
	if x.out.Len() > x.f.lim.MaxTextBytes && x.err == nil {
		x.err = fmt.Errorf("%w: the page's text passed the %s limit for documents", documents.ErrTooLarge, documents.HumanBytes(int64(x.f.lim.MaxTextBytes)))
	}
}

func endsWithSpace(b *strings.Builder) bool {
	s := b.String()
	if s == "" {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}

// text is the page's text with trailing spaces trimmed from lines and runs
// of blank lines collapsed.
func (x *textExtractor) text() string {
	lines := strings.Split(x.out.String(), "\n")
	var b strings.Builder
	blank := 0
	for _, l := range lines {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" {
			blank++
			continue
		}
		if b.Len() > 0 {
			if blank > 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte('\n')
			}
		}
		blank = 0
		b.WriteString(l)
	}
	return b.String()
}

// cleanText makes decoded glyph text safe: valid UTF-8, no control
// characters (tabs and newlines become spaces), no private-use or
// non-characters from broken maps.
func cleanText(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || r >= 0xFFFE && r <= 0xFFFF {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || r >= 0xFFFE && r <= 0xFFFF:
		default: // including U+FFFD for bytes that were not UTF-8
			b.WriteRune(r)
		}
	}
	return b.String()
}
