package doctest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// PDF writes small PDFs by hand for tests: numbered objects, a classic
// cross-reference table or a cross-reference stream.
type PDF struct {
	objs    [][]byte // objs[i] is object i+1's body
	version string
}

// NewPDF is an empty PDF 1.4.
func NewPDF() *PDF { return &PDF{version: "1.4"} }

// Add appends an object and returns its number.
func (p *PDF) Add(body string) int {
	p.objs = append(p.objs, []byte(body))
	return len(p.objs)
}

// Set replaces object n's body.
func (p *PDF) Set(n int, body string) { p.objs[n-1] = []byte(body) }

// Stream makes a stream object body with /Length filled in.
func Stream(dict string, data []byte) string {
	return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

// Deflate compresses data with zlib, as /FlateDecode reads it.
func Deflate(data []byte) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// Bytes writes the file with a classic xref table and the given trailer
// entries (besides /Size).
func (p *PDF) Bytes(trailer string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%%PDF-%s\n%%\xe2\xe3\xcf\xd3\n", p.version)
	offs := make([]int, len(p.objs))
	for i, o := range p.objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n", i+1)
		b.Write(o)
		b.WriteString("\nendobj\n")
	}
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f\r\n", len(p.objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n\r\n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", len(p.objs)+1, trailer, x)
	return b.Bytes()
}

// BytesObjStm writes the file with the given objects packed into one
// compressed object stream and a compressed cross-reference stream.
// Streams cannot go into an object stream; they stay direct.
func (p *PDF) BytesObjStm(trailer string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%%PDF-1.5\n%%\xe2\xe3\xcf\xd3\n")
	n := len(p.objs)
	stmNum := n + 1
	xrefNum := n + 2
	type entry struct{ typ, a, b int }
	entries := make([]entry, n+3)
	entries[0] = entry{0, 0, 65535}
	var packed []int
	for i, o := range p.objs {
		if bytes.Contains(o, []byte("stream\n")) {
			entries[i+1] = entry{1, b.Len(), 0}
			fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
			continue
		}
		packed = append(packed, i+1)
	}
	var head, body bytes.Buffer
	for k, num := range packed {
		fmt.Fprintf(&head, "%d %d ", num, body.Len())
		body.Write(p.objs[num-1])
		body.WriteString("\n")
		entries[num] = entry{2, stmNum, k}
	}
	data := append(head.Bytes(), body.Bytes()...)
	entries[stmNum] = entry{1, b.Len(), 0}
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", stmNum, Stream(fmt.Sprintf("/Type /ObjStm /N %d /First %d /Filter /FlateDecode", len(packed), head.Len()), Deflate(data)))
	entries[xrefNum] = entry{1, b.Len(), 0}
	var rows []byte
	for _, e := range entries {
		rows = append(rows, byte(e.typ), byte(e.a>>24), byte(e.a>>16), byte(e.a>>8), byte(e.a), byte(e.b>>8), byte(e.b))
	}
	x := b.Len()
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", xrefNum, Stream(fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] /Filter /FlateDecode %s", len(entries), trailer), Deflate(rows)))
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", x)
	return b.Bytes()
}

// pdfText escapes s for a literal PDF string.
func pdfText(s string) string {
	return strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s)
}

// SimplePDF is a PDF with one page per content stream, in Helvetica.
func SimplePDF(contents ...string) (*PDF, int) {
	p := NewPDF()
	catalog := p.Add("")
	pages := p.Add("")
	font := p.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	var kids []string
	for _, c := range contents {
		content := p.Add(Stream("", []byte(c)))
		page := p.Add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", pages, content, font))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	p.Set(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pages))
	p.Set(pages, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids)))
	return p, catalog
}

// TextPage is a content stream showing each line at 14 points, 16 apart.
func TextPage(lines ...string) string {
	var b strings.Builder
	b.WriteString("BT /F1 12 Tf 72 720 Td 16 TL\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("T*\n")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", pdfText(l))
	}
	b.WriteString("ET\n")
	return b.String()
}
