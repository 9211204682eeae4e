package extract

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"nibble/app/documents"
)

const docxNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`

// buildDOCX zips parts into a .docx.
func buildDOCX(t testing.TB, parts map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "word/document.xml", "word/styles.xml"} {
		body, ok := parts[name]
		if !ok {
			continue
		}
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	for name, body := range parts {
		switch name {
		case "[Content_Types].xml", "_rels/.rels", "word/document.xml", "word/styles.xml":
			continue
		}
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func docxBody(body string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + docxNS + `><w:body>` + body + `</w:body></w:document>`
}

const docxRels = `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`

func TestExtractDOCX(t *testing.T) {
	styles := `<?xml version="1.0"?><w:styles ` + docxNS + `>
<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style>
<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="MyHeading"><w:basedOn w:val="berschrift1"/></w:style>
</w:styles>`
	body := docxBody(`
<w:p><w:pPr><w:pStyle w:val="Titel"/></w:pPr><w:r><w:t>Annual</w:t></w:r><w:r><w:t xml:space="preserve"> Report</w:t></w:r></w:p>
<w:p><w:r><w:t>Name:</w:t></w:r><w:r><w:tab/><w:t>Ada</w:t></w:r><w:r><w:br/><w:t>Second line</w:t></w:r></w:p>
<w:p><w:r><w:t>Kept </w:t></w:r><w:del><w:r><w:delText>deleted </w:delText></w:r></w:del><w:r><w:t>text</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="MyHeading"/></w:pPr><w:r><w:t>Results</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>first item</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>second item</w:t></w:r></w:p>
<w:tbl>
 <w:tr><w:tc><w:p><w:r><w:t>Quarter</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Sales</w:t></w:r></w:p></w:tc></w:tr>
 <w:tr><w:tc><w:p><w:r><w:t>Q1</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>10</w:t></w:r></w:p><w:p><w:r><w:t>units</w:t></w:r></w:p></w:tc></w:tr>
</w:tbl>
<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:t>shown once</w:t></mc:Choice><mc:Fallback><w:t>fallback copy</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>
<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>No stray tab</w:t></w:r></w:p>
<w:p/>`)
	data := buildDOCX(t, map[string]string{
		"_rels/.rels":       docxRels,
		"word/document.xml": body,
		"word/styles.xml":   styles,
	})
	doc := mustExtract(t, "report.docx", data)
	want := "# Annual Report\n\n" +
		"Name:\tAda\nSecond line\n" +
		"Kept text\n\n" +
		"# Results\n\n" +
		"- first item\n" +
		"- second item\n\n" +
		"Quarter | Sales\n" +
		"Q1 | 10 units\n\n" +
		"shown once\n" +
		"No stray tab"
	if doc.Text != want {
		t.Errorf("text:\n%q\nwant:\n%q", doc.Text, want)
	}
	if doc.Kind != documents.KindDOCX {
		t.Errorf("kind %q", doc.Kind)
	}
}

func TestExtractDOCXDamaged(t *testing.T) {
	if _, err := Bytes("a.docx", []byte("PK\x03\x04 not really a zip"), documents.Limits{}); !errors.Is(err, documents.ErrDamaged) {
		t.Errorf("broken zip: %v", err)
	}
	noDoc := buildDOCX(t, map[string]string{"_rels/.rels": docxRels, "word/other.xml": "<x/>"})
	if _, err := Bytes("b.docx", noDoc, documents.Limits{}); !errors.Is(err, documents.ErrDamaged) || !strings.Contains(err.Error(), "word/document.xml") {
		t.Errorf("no document part: %v", err)
	}
	badXML := buildDOCX(t, map[string]string{"word/document.xml": docxBody("<w:p><w:r><w:t>unclosed")})
	if _, err := Bytes("c.docx", badXML, documents.Limits{}); !errors.Is(err, documents.ErrDamaged) {
		t.Errorf("malformed XML: %v", err)
	}
	// A flipped byte in the compressed data: checksum or inflate error.
	good := buildDOCX(t, map[string]string{"word/document.xml": docxBody(strings.Repeat("<w:p><w:r><w:t>some text here</w:t></w:r></w:p>", 50))})
	i := bytes.Index(good, []byte("word/document.xml")) + len("word/document.xml") + 20
	bad := append([]byte{}, good...)
	bad[i] ^= 0xff
	if _, err := Bytes("d.docx", bad, documents.Limits{}); err == nil {
		t.Error("corrupt entry: no error")
	}
	empty := buildDOCX(t, map[string]string{"word/document.xml": docxBody("<w:p/>")})
	if _, err := Bytes("e.docx", empty, documents.Limits{}); !errors.Is(err, documents.ErrNoText) {
		t.Errorf("empty document: %v", err)
	}
}

// deflateRepeat makes a raw deflate stream that inflates to n copies of
// 1 MiB of 'a', without compressing n MiB: one compressed MiB, flushed to a
// byte boundary, repeated, then an empty final block.
func deflateRepeat(t testing.TB, n int) []byte {
	var one bytes.Buffer
	fw, _ := flate.NewWriter(&one, flate.BestCompression)
	fw.Write(bytes.Repeat([]byte("a"), 1<<20))
	fw.Flush()
	var out bytes.Buffer
	for i := 0; i < n; i++ {
		out.Write(one.Bytes())
	}
	fw2, _ := flate.NewWriter(&out, flate.BestCompression)
	fw2.Close() // an empty final block
	return out.Bytes()
}

// zipRaw writes one deflated entry with the sizes and checksum given (the
// header may lie).
func zipRaw(t testing.TB, name string, deflated []byte, size uint64, crc uint32) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, CompressedSize64: uint64(len(deflated)), UncompressedSize64: size, CRC32: crc})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(deflated)
	zw.Close()
	return b.Bytes()
}

// TestExtractDOCXZipBomb: a small .docx whose document.xml inflates to
// 4 GiB must stop at a limit at once, whatever its header claims.
func TestExtractDOCXZipBomb(t *testing.T) {
	bomb := deflateRepeat(t, 4096) // 4 GiB of 'a' from about 4 MiB
	cases := []struct {
		name string
		size uint64
		lim  documents.Limits
		want string
	}{
		{"honest header, ratio limit", 4 << 30, documents.Limits{}, "compression ratio above 200:1"},
		{"honest header, inflate limit", 4 << 30, documents.Limits{MaxRatio: 1 << 20, MaxInflatedBytes: 16 << 20}, "passed the 16 MiB limit"},
		{"lying header", 1000, documents.Limits{}, "past the 1000 bytes the archive declares"},
	}
	for _, c := range cases {
		data := zipRaw(t, "word/document.xml", bomb, c.size, crc32.ChecksumIEEE([]byte("x")))
		start := time.Now()
		_, err := Bytes("bomb.docx", data, c.lim)
		el := time.Since(start)
		if !errors.Is(err, documents.ErrLimit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrLimit with %q", c.name, err, c.want)
		}
		if el > 3*time.Second {
			t.Errorf("%s: took %v", c.name, el)
		}
		t.Logf("%s: stopped after %v: %v", c.name, el, err)
	}
	if len(bomb) > 8<<20 {
		t.Errorf("the bomb is %d bytes; meant to be small", len(bomb))
	}
}

// TestExtractDOCXDeepXML: 100000 nested elements stop at the depth limit.
func TestExtractDOCXDeepXML(t *testing.T) {
	const depth = 100000
	body := docxBody(strings.Repeat("<w:p>", depth) + "<w:r><w:t>deep</w:t></w:r>" + strings.Repeat("</w:p>", depth))
	data := buildDOCX(t, map[string]string{"word/document.xml": body})
	start := time.Now()
	_, err := Bytes("deep.docx", data, documents.Limits{})
	if !errors.Is(err, documents.ErrLimit) || !strings.Contains(err.Error(), "nested deeper than 256") {
		t.Errorf("deep XML: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	// Within the limit it reads fine.
	ok := docxBody(strings.Repeat("<w:sdt><w:sdtContent>", 50) + "<w:p><w:r><w:t>nested fine</w:t></w:r></w:p>" + strings.Repeat("</w:sdtContent></w:sdt>", 50))
	doc := mustExtract(t, "ok.docx", buildDOCX(t, map[string]string{"word/document.xml": ok}))
	if doc.Text != "nested fine" {
		t.Errorf("text %q", doc.Text)
	}
}
