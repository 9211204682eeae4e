package documents

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzLimits keep each input cheap; the properties are the same at any size.
var fuzzLimits = Limits{
	MaxFileBytes:     1 << 20,
	MaxTextBytes:     1 << 20,
	MaxInflatedBytes: 8 << 20,
	MaxRatio:         200,
	MaxDepth:         256,
	MaxPages:         200,
}

// checkExtract runs Extract and checks the properties every input must
// keep: no panic, bounded time and allocation, valid UTF-8 out, page spans
// inside the text, an error or a document (never both, never neither).
func checkExtract(t *testing.T, name string, data []byte) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	start := time.Now()
	doc, err := ExtractBytes(name, data, fuzzLimits)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms)
	if alloc := ms.TotalAlloc - before; alloc > 512<<20 {
		t.Errorf("allocated %d MiB for a %d-byte input", alloc>>20, len(data))
	}
	if elapsed > 10*time.Second {
		t.Errorf("took %v for a %d-byte input", elapsed, len(data))
	}
	if (err == nil) == (doc == nil) {
		t.Fatalf("doc %v, err %v", doc != nil, err)
	}
	if err != nil {
		if !utf8.ValidString(err.Error()) {
			t.Errorf("error message is not UTF-8: %q", err)
		}
		return
	}
	if !utf8.ValidString(doc.Text) || !utf8.ValidString(doc.Title) {
		t.Errorf("invalid UTF-8: %q", doc.Text)
	}
	for _, w := range doc.Warnings {
		if !utf8.ValidString(w) {
			t.Errorf("warning not UTF-8: %q", w)
		}
	}
	if len(doc.Text) > fuzzLimits.MaxTextBytes {
		t.Errorf("text of %d bytes over the limit", len(doc.Text))
	}
	prev := 0
	for i, p := range doc.Pages {
		if p.Number != i+1 || p.Start < prev || p.End < p.Start || p.End > len(doc.Text) {
			t.Fatalf("page spans %+v (text %d bytes)", doc.Pages, len(doc.Text))
		}
		prev = p.End
	}
}

// FuzzExtractPDF reads whole files; an input that does not start with
// "%PDF" is a page's content stream, wrapped in a valid file with a simple
// font, a Type0 font with a ToUnicode map and a Form XObject, so that the
// fuzzer reaches the content interpreter and the font decoding directly.
func FuzzExtractPDF(f *testing.F) {
	for _, s := range pdfSeeds() {
		f.Add(s)
	}
	for _, c := range contentSeeds {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte("%PDF")) {
			data = wrapContent(data)
		}
		checkExtract(t, "fuzz.pdf", data)
	})
}

var contentSeeds = []string{
	"BT /F1 12 Tf 72 720 Td (Hello) Tj T* [(W)-20(orld)-400(!)] TJ 0 -14 TD (a) ' 1 2 (b) \" ET",
	"q 2 0 0 2 10 10 cm BT /F2 10 Tf 1 0 0 1 50 50 Tm <00200021> Tj ET /Fm0 Do Q BI /W 1 /H 1 ID \x00 EI",
	"BT /F2 9 Tf 3 Tc 2 Tw 90 Tz 12 TL 1 Ts <0041> Tj T* <00400003> Tj ET",
}

// wrapContent puts a content stream into a PDF with fonts and a form.
func wrapContent(content []byte) []byte {
	p := newTestPDF()
	catalog := p.add("<< /Type /Catalog /Pages 2 0 R >>")
	pages := p.add("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	p.add("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R /F2 6 0 R >> /XObject << /Fm0 9 0 R >> >> >>")
	p.add(stream("", content))
	p.add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Differences [1 /fi /uni00E9] >> >>")
	p.add("<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /DescendantFonts [7 0 R] /ToUnicode 8 0 R >>")
	p.add("<< /Type /Font /Subtype /CIDFontType2 /DW 500 /W [3 [250] 32 48 600] >>")
	p.add(stream("", []byte("1 begincodespacerange <0000> <FFFF> endcodespacerange 1 beginbfchar <0003> <0020> endbfchar 1 beginbfrange <0020> <0030> <0041> endbfrange 1 beginbfrange <0040> <0041> [<D83DDE00> <00660069>] endbfrange")))
	p.add(stream("/Type /XObject /Subtype /Form /Resources << /Font << /F1 5 0 R >> >>", []byte("BT /F1 8 Tf (form) Tj ET")))
	_ = pages
	return p.bytes(fmt.Sprintf("/Root %d 0 R", catalog))
}

func FuzzExtractDOCX(f *testing.F) {
	for _, s := range docxSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkExtract(t, "fuzz.docx", data)
	})
}

func FuzzExtractHTML(f *testing.F) {
	for _, s := range htmlSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkExtract(t, "fuzz.html", data)
	})
}

// FuzzChunk chunks and plans arbitrary text: chunks are valid ranges on
// character boundaries within their token bound, cover every non-space
// byte, and a plan never goes over its context.
func FuzzChunk(f *testing.F) {
	f.Add("# Title\n\nSome text.\n\n## Part\n\nMore text here.", uint16(8), uint16(2), byte(1), "text?")
	f.Add(strings.Repeat("word ", 500), uint16(16), uint16(4), byte(0), "word")
	f.Add("日本語のテキスト。"+strings.Repeat("東京", 100), uint16(5), uint16(0), byte(2), "東京")
	f.Add("noSpacesAtAllInThisVeryLongWordThatGoesOnAndOn", uint16(1), uint16(0), byte(0), "")
	f.Fuzz(func(t *testing.T, text string, target, overlap uint16, kind byte, question string) {
		kinds := []Kind{KindText, KindMarkdown, KindCode, KindHTML, KindDOCX}
		doc := NewDocument("fuzz", kinds[int(kind)%len(kinds)], text)
		count := TokenCounter(countBytes4)
		if kind&0x80 != 0 {
			count = countWords
		}
		tgt := int(target%512) + 1
		ov := int(overlap) % tgt
		chunks, err := ChunkDocument(doc, count, tgt, ov)
		if err != nil {
			t.Fatal(err)
		}
		covered := 0
		for i, c := range chunks {
			if c.Index != i || c.Start < 0 || c.End > len(doc.Text) || c.Start >= c.End {
				t.Fatalf("chunk %d: %+v of %d bytes", i, c, len(doc.Text))
			}
			s := doc.Text[c.Start:c.End]
			if !utf8.ValidString(s) {
				t.Fatalf("chunk %d cuts a character: %q", i, s)
			}
			if n := count(s); n > tgt+ov+2 && utf8.RuneCountInString(s) > 1 {
				t.Errorf("chunk %d: %d tokens, target %d overlap %d: %q", i, n, tgt, ov, s)
			}
			if c.Start > covered && strings.TrimSpace(doc.Text[covered:c.Start]) != "" {
				t.Fatalf("bytes %d..%d in no chunk: %q", covered, c.Start, doc.Text[covered:c.Start])
			}
			if c.End > covered {
				covered = c.End
			}
		}
		if strings.TrimSpace(doc.Text[covered:]) != "" {
			t.Fatalf("tail %q in no chunk", doc.Text[covered:])
		}
		ctx := 300 + int(target)%4000
		plan, err := PlanContext(PlanRequest{Documents: []*Document{doc}, Question: question, Count: count, ContextTokens: ctx, ReserveTokens: 50, OverheadTokens: 10})
		if err != nil {
			return // e.g. a question too long for the context: an error, fine
		}
		if plan.PromptTokens+plan.ReserveTokens > plan.ContextTokens {
			t.Errorf("prompt of %d tokens + %d reserved > context %d", plan.PromptTokens, plan.ReserveTokens, plan.ContextTokens)
		}
		if !utf8.ValidString(plan.Messages.System) {
			t.Error("system message is not UTF-8")
		}
	})
}

func pdfSeeds() [][]byte {
	var seeds [][]byte
	p, root := simplePDF(textPage("Hello, fuzz.", "Second line"), "BT /F1 12 Tf [(A)-300(B)] TJ ET")
	seeds = append(seeds, p.bytes(fmt.Sprintf("/Root %d 0 R", root)))
	q, root2 := simplePDF(textPage("Object streams"))
	q.set(4, stream("/Filter /FlateDecode", deflate([]byte(textPage("Object streams")))))
	seeds = append(seeds, q.bytesObjStm(fmt.Sprintf("/Root %d 0 R", root2)))
	full := seeds[0]
	seeds = append(seeds, full[:len(full)/2])
	return seeds
}

func htmlSeeds() [][]byte {
	return [][]byte{
		[]byte(`<!DOCTYPE html><html><head><title>T</title><style>x{}</style></head><body><h1>H</h1><p>P <b>b</b></p><ul><li>i</li></ul><table><tr><td>a</td><td>b</td></tr></table><pre> x
 y</pre></body></html>`),
		[]byte(`<meta charset="windows-1252"><p>caf` + "\xe9" + `</p><script>x</script><ol start=3><li>a`),
		[]byte(strings.Repeat("<div>", 50) + "deep"),
	}
}

func docxSeeds(tb testing.TB) [][]byte {
	return [][]byte{
		buildDOCX(tb, map[string]string{
			"_rels/.rels":       docxRels,
			"word/document.xml": docxBody(`<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Title</w:t></w:r></w:p><w:p><w:r><w:t>Body</w:t><w:tab/><w:br/></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>c</w:t></w:r></w:p></w:tc></w:tr></w:tbl>`),
			"word/styles.xml":   `<w:styles ` + docxNS + `><w:style w:styleId="Heading1"><w:name w:val="heading 1"/></w:style></w:styles>`,
		}),
		buildDOCX(tb, map[string]string{"word/document.xml": docxBody(`<w:p><w:r><w:t>only</w:t></w:r></w:p>`)}),
	}
}

// TestWriteFuzzSeeds writes the seeds above into testdata/fuzz when
// NIBBLE_WRITE_FUZZ_SEEDS=1, in the format go test -fuzz reads.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("NIBBLE_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set NIBBLE_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
	write := func(target string, i int, args ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case string:
				fmt.Fprintf(&b, "string(%q)\n", v)
			case uint16:
				fmt.Fprintf(&b, "uint16(%d)\n", v)
			case byte:
				fmt.Fprintf(&b, "byte(%q)\n", v)
			}
		}
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range pdfSeeds() {
		write("FuzzExtractPDF", i, s)
	}
	for i, c := range contentSeeds {
		write("FuzzExtractPDF", 10+i, []byte(c))
	}
	// Hostile shapes as seeds too.
	p, root := simplePDF("")
	p.set(4, stream("/Filter /FlateDecode", deflate([]byte(strings.Repeat("[", 300)+"(x) Tj"))))
	write("FuzzExtractPDF", 3, p.bytes(fmt.Sprintf("/Root %d 0 R", root)))
	write("FuzzExtractPDF", 4, encryptedPDF(t, ""))
	for i, s := range docxSeeds(t) {
		write("FuzzExtractDOCX", i, s)
	}
	write("FuzzExtractDOCX", 2, zipRaw(t, "word/document.xml", deflateRepeat(t, 4), 4<<20, 0))
	for i, s := range htmlSeeds() {
		write("FuzzExtractHTML", i, s)
	}
	write("FuzzChunk", 0, "# A\n\npara one\n\n## B\n\n```\n# c\n```\npara two", uint16(6), uint16(1), byte(1), "para")
	write("FuzzChunk", 1, "line\n"+strings.Repeat("x", 300)+"\n\u00e9\u00e9\u00e9", uint16(3), uint16(0), byte(0x80), "")
}
