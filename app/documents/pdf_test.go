package documents

import (
	"bytes"
	"crypto/md5"
	"crypto/rc4"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func mustExtract(t *testing.T, name string, data []byte) *Document {
	t.Helper()
	doc, err := ExtractBytes(name, data, Limits{})
	if err != nil {
		t.Fatalf("Extract(%s): %v", name, err)
	}
	return doc
}

func pageText(d *Document, n int) string {
	for _, p := range d.Pages {
		if p.Number == n {
			return d.Text[p.Start:p.End]
		}
	}
	return ""
}

func TestExtractPDF(t *testing.T) {
	p, root := simplePDF(
		textPage("Quarterly report", "Revenue grew by 12 percent."),
		// Words spaced by TJ offsets, as typesetters do, and a line moved with Td.
		"BT /F1 12 Tf 72 720 Td [(Hello)-333(world)] TJ 0 -16 Td [(Ker)20(ning) ( stays)] TJ ET",
		"", // an empty page
		textPage("Appendix: the (parenthesised) \\ backslash"),
	)
	doc := mustExtract(t, "report.pdf", p.bytes(fmt.Sprintf("/Root %d 0 R", root)))
	if doc.Kind != KindPDF {
		t.Errorf("kind %q", doc.Kind)
	}
	if len(doc.Pages) != 4 {
		t.Fatalf("%d pages, want 4: %+v", len(doc.Pages), doc.Pages)
	}
	for n, want := range map[int]string{
		1: "Quarterly report\nRevenue grew by 12 percent.",
		2: "Hello world\nKerning stays",
		3: "",
		4: `Appendix: the (parenthesised) \ backslash`,
	} {
		if got := pageText(doc, n); got != want {
			t.Errorf("page %d: %q, want %q", n, got, want)
		}
	}
	if doc.PageAt(strings.Index(doc.Text, "Kerning")) != 2 || doc.PageAt(strings.Index(doc.Text, "Appendix")) != 4 {
		t.Errorf("PageAt wrong: %+v", doc.Pages)
	}
	if len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], "page 3 without text") {
		t.Errorf("warnings %q, want one about page 3", doc.Warnings)
	}
}

func TestExtractPDFObjectStreams(t *testing.T) {
	p, root := simplePDF(textPage("Packed into an object stream."))
	// Compress the content stream too.
	p.set(4, stream("/Filter /FlateDecode", deflate([]byte(textPage("Packed into an object stream.")))))
	doc := mustExtract(t, "packed.pdf", p.bytesObjStm(fmt.Sprintf("/Root %d 0 R", root)))
	if got := pageText(doc, 1); got != "Packed into an object stream." {
		t.Errorf("text %q", got)
	}
	if len(doc.Warnings) != 0 {
		t.Errorf("warnings %q", doc.Warnings)
	}
}

func TestExtractPDFToUnicode(t *testing.T) {
	// A Type0 font with Identity-H codes (glyph IDs) and a ToUnicode map,
	// as PDFs from word processors have; plus a simple font with
	// /Differences and a ligature glyph.
	p := newTestPDF()
	catalog := p.add("")
	pages := p.add("")
	cmap := `/CIDInit /ProcSet findresource begin 12 dict begin begincmap
1 begincodespacerange <0000> <FFFF> endcodespacerange
2 beginbfchar <0003> <0020> <0010> <00E9> endbfchar
1 beginbfrange <0020> <0030> <0041> endbfrange
1 beginbfrange <0040> <0041> [<D83DDE00> <00660069>] endbfrange
endcmap CMapName currentdict /CMap defineresource pop end end`
	tu := p.add(stream("", []byte(cmap)))
	desc := p.add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /ABCDEF+Calibri /DW 500 /W [3 [250] 32 48 600] >>")
	type0 := p.add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+Calibri /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", desc, tu))
	simple := p.add("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding << /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /uni00E9 /germandbls] >> >>")
	content := p.add(stream("", []byte(
		"BT /F1 12 Tf 72 720 Td <0020002100220003002300100040> Tj ET\n"+
			"BT /F2 12 Tf 72 700 Td (\\001nal caf\\002 Stra\\003e) Tj ET\n"+
			"BT /F1 12 Tf 72 680 Td <0041> Tj ET\n")))
	page := p.add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> >>", pages, content, type0, simple))
	p.set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	doc := mustExtract(t, "fonts.pdf", p.bytes(fmt.Sprintf("/Root %d 0 R", catalog)))
	want := "ABC Dé😀\nfinal café Straße\nfi"
	if doc.Text != want {
		t.Errorf("text %q, want %q", doc.Text, want)
	}
}

func TestExtractPDFTruncated(t *testing.T) {
	var contents []string
	for i := 1; i <= 6; i++ {
		contents = append(contents, textPage(fmt.Sprintf("This is page %d of the report.", i)))
	}
	p, root := simplePDF(contents...)
	full := p.bytes(fmt.Sprintf("/Root %d 0 R", root))

	// Cut in the middle of the page objects: the first pages survive.
	cut := full[:bytes.Index(full, []byte("page 4"))]
	doc, err := ExtractBytes("cut.pdf", cut, Limits{})
	if err != nil {
		t.Fatalf("truncated PDF: %v", err)
	}
	if !strings.Contains(doc.Text, "This is page 1") || strings.Contains(doc.Text, "page 6") {
		t.Errorf("text %q", doc.Text)
	}
	if !hasWarning(doc, "truncated") {
		t.Errorf("no truncation warning: %q", doc.Warnings)
	}
	// Warned that pages are missing from the 6 the tree lists.
	if !hasWarning(doc, "says it has 6 pages") {
		t.Errorf("no missing-pages warning: %q", doc.Warnings)
	}

	// Cut before the page tree: nothing to read, a clear error.
	for _, n := range []int{0, 5, 9, 20, 40} {
		_, err := ExtractBytes("cut.pdf", full[:n], Limits{})
		if err == nil || !errors.Is(err, ErrDamaged) {
			t.Errorf("PDF cut at %d bytes: %v, want ErrDamaged", n, err)
		}
	}
}

func hasWarning(d *Document, sub string) bool {
	for _, w := range d.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestExtractPDFBrokenXref(t *testing.T) {
	p, root := simplePDF(textPage("Offsets in this file are all wrong."))
	data := p.bytes(fmt.Sprintf("/Root %d 0 R", root))
	// Shift every object by inserting junk after the header: the xref
	// offsets now point to the wrong bytes.
	data = bytes.Replace(data, []byte("\n1 0 obj"), []byte("\n% some junk a broken writer added\n1 0 obj"), 1)
	doc := mustExtract(t, "broken.pdf", data)
	if doc.Text != "Offsets in this file are all wrong." {
		t.Errorf("text %q", doc.Text)
	}
	// No startxref at all: the table is rebuilt by scanning.
	i := bytes.LastIndex(data, []byte("startxref"))
	noXref := append(append([]byte{}, data[:i]...), []byte("%%EOF\n")...)
	doc = mustExtract(t, "noxref.pdf", noXref)
	if doc.Text != "Offsets in this file are all wrong." || !hasWarning(doc, "rebuilt") {
		t.Errorf("text %q warnings %q", doc.Text, doc.Warnings)
	}
}

// encryptRC4 builds a PDF protected by the standard security handler,
// revision 3, 128-bit RC4, with the given user password (empty: a
// permissions-only PDF any viewer opens).
func encryptedPDF(t *testing.T, userPassword string) []byte {
	t.Helper()
	id0 := []byte("0123456789abcdef")
	o := bytes.Repeat([]byte{0x42}, 32) // the owner entry: any value works for opening as user
	perms := int32(-3904)
	key := legacyKey([]byte(userPassword), o, uint32(perms), id0, 3, 16, true)
	// U per algorithm 5.
	h := md5.New()
	h.Write(passwordPad)
	h.Write(id0)
	u := h.Sum(nil)
	for i := 0; i < 20; i++ {
		k := make([]byte, len(key))
		for j := range key {
			k[j] = key[j] ^ byte(i)
		}
		c, _ := rc4.NewCipher(k)
		c.XORKeyStream(u, u)
	}
	u = append(u, bytes.Repeat([]byte{0}, 16)...)

	objKey := func(num int) []byte {
		h := md5.New()
		h.Write(key)
		h.Write([]byte{byte(num), byte(num >> 8), byte(num >> 16), 0, 0})
		return h.Sum(nil)[:16]
	}
	crypt := func(num int, data []byte) []byte {
		c, _ := rc4.NewCipher(objKey(num))
		out := make([]byte, len(data))
		c.XORKeyStream(out, data)
		return out
	}
	hexs := func(b []byte) string { return fmt.Sprintf("<%x>", b) }

	p := newTestPDF()
	catalog := p.add("")
	pages := p.add("")
	font := p.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	content := p.add("")
	p.set(content, stream("", crypt(content, []byte(textPage("Secret but readable.")))))
	page := p.add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", pages, content, font))
	info := p.add("")
	p.set(info, fmt.Sprintf("<< /Title %s >>", hexs(crypt(info, []byte("Encrypted title")))))
	enc := p.add(fmt.Sprintf("<< /Filter /Standard /V 2 /R 3 /Length 128 /P %d /O %s /U %s >>", perms, hexs(o), hexs(u)))
	p.set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return p.bytes(fmt.Sprintf("/Root %d 0 R /Info %d 0 R /Encrypt %d 0 R /ID [%s %s]", catalog, info, enc, hexs(id0), hexs(id0)))
}

func TestExtractPDFEncrypted(t *testing.T) {
	doc := mustExtract(t, "perms-only.pdf", encryptedPDF(t, ""))
	if doc.Text != "Secret but readable." || doc.Title != "Encrypted title" {
		t.Errorf("text %q title %q", doc.Text, doc.Title)
	}
	if !hasWarning(doc, "empty user password") {
		t.Errorf("warnings %q", doc.Warnings)
	}
	_, err := ExtractBytes("locked.pdf", encryptedPDF(t, "hunter2"), Limits{})
	if !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "needs a password") {
		t.Errorf("password-protected PDF: %v, want ErrEncrypted saying it needs a password", err)
	}
}

func TestExtractPDFScanned(t *testing.T) {
	p := newTestPDF()
	catalog := p.add("")
	pages := p.add("")
	img := p.add(stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}))
	var kids []string
	for i := 0; i < 3; i++ {
		content := p.add(stream("", []byte("q 612 0 0 792 0 0 cm /Im0 Do Q")))
		page := p.add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /XObject << /Im0 %d 0 R >> >> >>", pages, content, img))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	p.set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count 3 >>", strings.Join(kids, " ")))
	_, err := ExtractBytes("scan.pdf", p.bytes(fmt.Sprintf("/Root %d 0 R", catalog)), Limits{})
	if !errors.Is(err, ErrNoText) || !strings.Contains(err.Error(), "scan") || !strings.Contains(err.Error(), "3 pages") {
		t.Errorf("scanned PDF: %v, want ErrNoText naming a scan of 3 pages", err)
	}
}

func TestExtractPDFFormXObject(t *testing.T) {
	p, root := simplePDF("q 1 0 0 1 0 0 cm /Fm0 Do Q")
	form := p.add(stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Filter /FlateDecode",
		deflate([]byte(textPage("Text inside a form, drawn once.")))))
	// Page 1's resources name the form; the form draws itself too (a cycle).
	p.set(5, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> /XObject << /Fm0 %d 0 R >> >> >>", form))
	doc := mustExtract(t, "form.pdf", p.bytes(fmt.Sprintf("/Root %d 0 R", root)))
	if doc.Text != "Text inside a form, drawn once." {
		t.Errorf("text %q", doc.Text)
	}
}

// TestExtractPDFHostile feeds PDFs built to hang, crash or exhaust a naive
// reader; each must fail or succeed quickly, without a panic.
func TestExtractPDFHostile(t *testing.T) {
	cases := map[string][]byte{}

	// An object stream that contains itself (crashes github.com/ledongthuc/pdf
	// with a fatal stack overflow).
	{
		var b bytes.Buffer
		b.WriteString("%PDF-1.5\n")
		x := b.Len()
		rows := []byte{0, 0, 0, 0, 0, 0xff, 0xff, 2, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, byte(x), 0, 0}
		fmt.Fprintf(&b, "3 0 obj\n<< /Type /XRef /Size 3 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n", len(rows))
		b.Write(rows)
		fmt.Fprintf(&b, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", x)
		cases["self-containing object stream"] = b.Bytes()
	}
	// A page tree whose node is its own kid (hangs ledongthuc/pdf).
	{
		p := newTestPDF()
		p.add("<< /Type /Catalog /Pages 2 0 R >>")
		p.add("<< /Type /Pages /Kids [2 0 R 2 0 R] /Count 5 >>")
		cases["page tree cycle"] = p.bytes("/Root 1 0 R")
	}
	// A /Prev chain that loops, and an xref claiming a billion objects.
	{
		p, root := simplePDF(textPage("x"))
		data := p.bytes(fmt.Sprintf("/Root %d 0 R", root))
		x := bytes.LastIndex(data, []byte("xref\n"))
		cases["xref Prev loop"] = bytes.Replace(data, []byte("/Size"), []byte(fmt.Sprintf("/Prev %d /Size", x)), 1)
		cases["huge xref subsection"] = bytes.Replace(data, []byte("xref\n0 "), []byte("xref\n1000000000 1000000000\n0 "), 1)
		cases["huge Size"] = bytes.Replace(data, []byte("/Size 6"), []byte("/Size 9000000000000"), 1)
	}
	// Objects nested 100000 deep.
	{
		p, root := simplePDF(textPage("x"))
		p.add(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))
		p.set(root, "<< /Type /Catalog /Pages 2 0 R /Deep 7 0 R >>")
		cases["deep arrays"] = p.bytes(fmt.Sprintf("/Root %d 0 R", root))
		content := strings.Repeat("[", 100000) + " (x) Tj"
		q, root2 := simplePDF(content)
		cases["deep content arrays"] = q.bytes(fmt.Sprintf("/Root %d 0 R", root2))
	}
	// A content stream that inflates 1000:1 (a flate bomb).
	{
		bomb := deflate(bytes.Repeat([]byte(" "), 64<<20))
		p, root := simplePDF("")
		p.set(4, stream("/Filter /FlateDecode", bomb))
		cases["flate bomb"] = p.bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	// A form drawn a million times.
	{
		p, root := simplePDF(strings.Repeat("/Fm0 Do ", 1000000))
		p.set(4, stream("/Filter /FlateDecode", deflate([]byte(strings.Repeat("/Fm0 Do ", 1000000)))))
		form := p.add(stream("/Type /XObject /Subtype /Form /BBox [0 0 1 1]", []byte(strings.Repeat("BT /F1 1 Tf (form text) Tj ET ", 100))))
		p.set(5, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> /XObject << /Fm0 %d 0 R >> >> >>", form))
		cases["form repeated"] = p.bytes(fmt.Sprintf("/Root %d 0 R", root))
		p.set(4, stream("", []byte(strings.Repeat("/Fm0 Do ", 1000000))))
		cases["form repeated, uncompressed"] = p.bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	// A Length that refers to the stream itself, and an absurd /Columns.
	{
		p, root := simplePDF("")
		p.set(4, "<< /Length 4 0 R /Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 99999999999 >> >>\nstream\nxyz\nendstream")
		cases["self-referencing length"] = p.bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	want := map[string]error{
		"self-containing object stream": ErrDamaged,
		"page tree cycle":               ErrDamaged,
		"deep content arrays":           ErrLimit,
		"flate bomb":                    ErrLimit,
		"form repeated":                 ErrLimit,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			doc, err := ExtractBytes("hostile.pdf", data, Limits{})
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if err == nil && doc == nil {
				t.Fatal("nil document without an error")
			}
			if w := want[name]; w != nil && !errors.Is(err, w) {
				t.Errorf("error %v, want %v", err, w)
			}
			if err == nil && !utf8.ValidString(doc.Text) {
				t.Error("invalid UTF-8")
			}
			if name == "form repeated, uncompressed" && (err != nil || !hasWarning(doc, "the same form more than 100 times")) {
				t.Errorf("repeated form: err %v, want a warning about skipped repeats", err)
			}
			t.Logf("%s: err=%v (%v)", name, err, time.Since(start))
		})
	}
}

func TestPageList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "page 3"},
		{[]int{2, 5, 6, 7, 9}, "pages 2, 5–7, 9"},
	} {
		if got := pageList(c.in); got != c.want {
			t.Errorf("pageList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
