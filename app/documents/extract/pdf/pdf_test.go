package pdf_test

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

	"nibble/app/documents"
	"nibble/app/documents/extract"
	"nibble/app/documents/extract/pdf"
	"nibble/app/documents/internal/doctest"
)

func mustExtract(t *testing.T, name string, data []byte) *documents.Document {
	t.Helper()
	doc, err := extract.Bytes(name, data, documents.Limits{})
	if err != nil {
		t.Fatalf("Extract(%s): %v", name, err)
	}
	return doc
}

func pageText(d *documents.Document, n int) string {
	for _, p := range d.Pages {
		if p.Number == n {
			return d.Text[p.Start:p.End]
		}
	}
	return ""
}

func TestExtractPDF(t *testing.T) {
	p, root := doctest.SimplePDF(
		doctest.TextPage("Quarterly report", "Revenue grew by 12 percent."),
		// Words spaced by TJ offsets, as typesetters do, and a line moved with Td.
		"BT /F1 12 Tf 72 720 Td [(Hello)-333(world)] TJ 0 -16 Td [(Ker)20(ning) ( stays)] TJ ET",
		"", // an empty page
		doctest.TextPage("Appendix: the (parenthesised) \\ backslash"),
	)
	doc := mustExtract(t, "report.pdf", p.Bytes(fmt.Sprintf("/Root %d 0 R", root)))
	if doc.Kind != documents.KindPDF {
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
	p, root := doctest.SimplePDF(doctest.TextPage("Packed into an object stream."))
	// Compress the content stream too.
	p.Set(4, doctest.Stream("/Filter /FlateDecode", doctest.Deflate([]byte(doctest.TextPage("Packed into an object stream.")))))
	doc := mustExtract(t, "packed.pdf", p.BytesObjStm(fmt.Sprintf("/Root %d 0 R", root)))
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
	p := doctest.NewPDF()
	catalog := p.Add("")
	pages := p.Add("")
	cmap := `/CIDInit /ProcSet findresource begin 12 dict begin begincmap
1 begincodespacerange <0000> <FFFF> endcodespacerange
2 beginbfchar <0003> <0020> <0010> <00E9> endbfchar
1 beginbfrange <0020> <0030> <0041> endbfrange
1 beginbfrange <0040> <0041> [<D83DDE00> <00660069>] endbfrange
endcmap CMapName currentdict /CMap defineresource pop end end`
	tu := p.Add(doctest.Stream("", []byte(cmap)))
	desc := p.Add("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /ABCDEF+Calibri /DW 500 /W [3 [250] 32 48 600] >>")
	type0 := p.Add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+Calibri /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", desc, tu))
	simple := p.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding << /BaseEncoding /WinAnsiEncoding /Differences [1 /fi /uni00E9 /germandbls] >> >>")
	content := p.Add(doctest.Stream("", []byte(
		"BT /F1 12 Tf 72 720 Td <0020002100220003002300100040> Tj ET\n"+
			"BT /F2 12 Tf 72 700 Td (\\001nal caf\\002 Stra\\003e) Tj ET\n"+
			"BT /F1 12 Tf 72 680 Td <0041> Tj ET\n")))
	page := p.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> >>", pages, content, type0, simple))
	p.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.Set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	doc := mustExtract(t, "fonts.pdf", p.Bytes(fmt.Sprintf("/Root %d 0 R", catalog)))
	want := "ABC Dé😀\nfinal café Straße\nfi"
	if doc.Text != want {
		t.Errorf("text %q, want %q", doc.Text, want)
	}
}

func TestExtractPDFTruncated(t *testing.T) {
	var contents []string
	for i := 1; i <= 6; i++ {
		contents = append(contents, doctest.TextPage(fmt.Sprintf("This is page %d of the report.", i)))
	}
	p, root := doctest.SimplePDF(contents...)
	full := p.Bytes(fmt.Sprintf("/Root %d 0 R", root))

	// Cut in the middle of the page objects: the first pages survive.
	cut := full[:bytes.Index(full, []byte("page 4"))]
	doc, err := extract.Bytes("cut.pdf", cut, documents.Limits{})
	if err != nil {
		t.Fatalf("truncated PDF: %v", err)
	}
	if !strings.Contains(doc.Text, "This is page 1") || strings.Contains(doc.Text, "page 6") {
		t.Errorf("text %q", doc.Text)
	}
	if !doctest.HasWarning(doc, "truncated") {
		t.Errorf("no truncation warning: %q", doc.Warnings)
	}
	// Warned that pages are missing from the 6 the tree lists.
	if !doctest.HasWarning(doc, "says it has 6 pages") {
		t.Errorf("no missing-pages warning: %q", doc.Warnings)
	}

	// Cut before the page tree: nothing to read, a clear error.
	if _, err := extract.Bytes("cut.pdf", full[:0], documents.Limits{}); !errors.Is(err, documents.ErrEmpty) {
		t.Errorf("PDF of 0 bytes: %v, want documents.ErrEmpty", err)
	}
	for _, n := range []int{5, 9, 20, 40} {
		_, err := extract.Bytes("cut.pdf", full[:n], documents.Limits{})
		if err == nil || !errors.Is(err, documents.ErrDamaged) {
			t.Errorf("PDF cut at %d bytes: %v, want documents.ErrDamaged", n, err)
		}
	}
}

func TestExtractPDFBrokenXref(t *testing.T) {
	p, root := doctest.SimplePDF(doctest.TextPage("Offsets in this file are all wrong."))
	data := p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
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
	if doc.Text != "Offsets in this file are all wrong." || !doctest.HasWarning(doc, "rebuilt") {
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
	key := pdf.LegacyKey([]byte(userPassword), o, uint32(perms), id0, 3, 16, true)
	// U per algorithm 5.
	h := md5.New()
	h.Write(pdf.PasswordPad)
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

	p := doctest.NewPDF()
	catalog := p.Add("")
	pages := p.Add("")
	font := p.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	content := p.Add("")
	p.Set(content, doctest.Stream("", crypt(content, []byte(doctest.TextPage("Secret but readable.")))))
	page := p.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", pages, content, font))
	info := p.Add("")
	p.Set(info, fmt.Sprintf("<< /Title %s >>", hexs(crypt(info, []byte("Encrypted title")))))
	enc := p.Add(fmt.Sprintf("<< /Filter /Standard /V 2 /R 3 /Length 128 /P %d /O %s /U %s >>", perms, hexs(o), hexs(u)))
	p.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.Set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%d 0 R] /Count 1 >>", page))
	return p.Bytes(fmt.Sprintf("/Root %d 0 R /Info %d 0 R /Encrypt %d 0 R /ID [%s %s]", catalog, info, enc, hexs(id0), hexs(id0)))
}

func TestExtractPDFEncrypted(t *testing.T) {
	doc := mustExtract(t, "perms-only.pdf", encryptedPDF(t, ""))
	if doc.Text != "Secret but readable." || doc.Title != "Encrypted title" {
		t.Errorf("text %q title %q", doc.Text, doc.Title)
	}
	if !doctest.HasWarning(doc, "empty user password") {
		t.Errorf("warnings %q", doc.Warnings)
	}
	_, err := extract.Bytes("locked.pdf", encryptedPDF(t, "hunter2"), documents.Limits{})
	if !errors.Is(err, documents.ErrEncrypted) || !strings.Contains(err.Error(), "needs a password") {
		t.Errorf("password-protected PDF: %v, want documents.ErrEncrypted saying it needs a password", err)
	}
}

func TestExtractPDFScanned(t *testing.T) {
	p := doctest.NewPDF()
	catalog := p.Add("")
	pages := p.Add("")
	img := p.Add(doctest.Stream("/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}))
	var kids []string
	for i := 0; i < 3; i++ {
		content := p.Add(doctest.Stream("", []byte("q 612 0 0 792 0 0 cm /Im0 Do Q")))
		page := p.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Contents %d 0 R /Resources << /XObject << /Im0 %d 0 R >> >> >>", pages, content, img))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	p.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.Set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count 3 >>", strings.Join(kids, " ")))
	_, err := extract.Bytes("scan.pdf", p.Bytes(fmt.Sprintf("/Root %d 0 R", catalog)), documents.Limits{})
	if !errors.Is(err, documents.ErrNoText) || !strings.Contains(err.Error(), "scan") || !strings.Contains(err.Error(), "3 pages") {
		t.Errorf("scanned PDF: %v, want documents.ErrNoText naming a scan of 3 pages", err)
	}
}

func TestExtractPDFFormXObject(t *testing.T) {
	p, root := doctest.SimplePDF("q 1 0 0 1 0 0 cm /Fm0 Do Q")
	form := p.Add(doctest.Stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Filter /FlateDecode",
		doctest.Deflate([]byte(doctest.TextPage("Text inside a form, drawn once.")))))
	// Page 1's resources name the form; the form draws itself too (a cycle).
	p.Set(5, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> /XObject << /Fm0 %d 0 R >> >> >>", form))
	doc := mustExtract(t, "form.pdf", p.Bytes(fmt.Sprintf("/Root %d 0 R", root)))
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
		p := doctest.NewPDF()
		p.Add("<< /Type /Catalog /Pages 2 0 R >>")
		p.Add("<< /Type /Pages /Kids [2 0 R 2 0 R] /Count 5 >>")
		cases["page tree cycle"] = p.Bytes("/Root 1 0 R")
	}
	// A /Prev chain that loops, and an xref claiming a billion objects.
	{
		p, root := doctest.SimplePDF(doctest.TextPage("x"))
		data := p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
		x := bytes.LastIndex(data, []byte("xref\n"))
		cases["xref Prev loop"] = bytes.Replace(data, []byte("/Size"), []byte(fmt.Sprintf("/Prev %d /Size", x)), 1)
		cases["huge xref subsection"] = bytes.Replace(data, []byte("xref\n0 "), []byte("xref\n1000000000 1000000000\n0 "), 1)
		cases["huge Size"] = bytes.Replace(data, []byte("/Size 6"), []byte("/Size 9000000000000"), 1)
	}
	// Objects nested 100000 deep.
	{
		p, root := doctest.SimplePDF(doctest.TextPage("x"))
		p.Add(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))
		p.Set(root, "<< /Type /Catalog /Pages 2 0 R /Deep 7 0 R >>")
		cases["deep arrays"] = p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
		content := strings.Repeat("[", 100000) + " (x) Tj"
		q, root2 := doctest.SimplePDF(content)
		cases["deep content arrays"] = q.Bytes(fmt.Sprintf("/Root %d 0 R", root2))
	}
	// A content stream that inflates 1000:1 (a flate bomb).
	{
		bomb := doctest.Deflate(bytes.Repeat([]byte(" "), 64<<20))
		p, root := doctest.SimplePDF("")
		p.Set(4, doctest.Stream("/Filter /FlateDecode", bomb))
		cases["flate bomb"] = p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	// A form drawn a million times.
	{
		p, root := doctest.SimplePDF(strings.Repeat("/Fm0 Do ", 1000000))
		p.Set(4, doctest.Stream("/Filter /FlateDecode", doctest.Deflate([]byte(strings.Repeat("/Fm0 Do ", 1000000)))))
		form := p.Add(doctest.Stream("/Type /XObject /Subtype /Form /BBox [0 0 1 1]", []byte(strings.Repeat("BT /F1 1 Tf (form text) Tj ET ", 100))))
		p.Set(5, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 3 0 R >> /XObject << /Fm0 %d 0 R >> >> >>", form))
		cases["form repeated"] = p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
		p.Set(4, doctest.Stream("", []byte(strings.Repeat("/Fm0 Do ", 1000000))))
		cases["form repeated, uncompressed"] = p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	// A Length that refers to the stream itself, and an absurd /Columns.
	{
		p, root := doctest.SimplePDF("")
		p.Set(4, "<< /Length 4 0 R /Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 99999999999 >> >>\nstream\nxyz\nendstream")
		cases["self-referencing length"] = p.Bytes(fmt.Sprintf("/Root %d 0 R", root))
	}
	want := map[string]error{
		"self-containing object stream": documents.ErrDamaged,
		"page tree cycle":               documents.ErrDamaged,
		"deep content arrays":           documents.ErrLimit,
		"flate bomb":                    documents.ErrLimit,
		"form repeated":                 documents.ErrLimit,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			doc, err := extract.Bytes("hostile.pdf", data, documents.Limits{})
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
			if name == "form repeated, uncompressed" && (err != nil || !doctest.HasWarning(doc, "the same form more than 100 times")) {
				t.Errorf("repeated form: err %v, want a warning about skipped repeats", err)
			}
			t.Logf("%s: err=%v (%v)", name, err, time.Since(start))
		})
	}
}
