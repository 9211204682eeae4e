package pdf_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"nibble/app/documents"
	"nibble/app/documents/extract"
	"nibble/app/documents/internal/doctest"
)

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
		doctest.CheckExtract(t, data, func() (*documents.Document, error) {
			return extract.Bytes("fuzz.pdf", data, doctest.FuzzLimits)
		})
	})
}

var contentSeeds = []string{
	"BT /F1 12 Tf 72 720 Td (Hello) Tj T* [(W)-20(orld)-400(!)] TJ 0 -14 TD (a) ' 1 2 (b) \" ET",
	"q 2 0 0 2 10 10 cm BT /F2 10 Tf 1 0 0 1 50 50 Tm <00200021> Tj ET /Fm0 Do Q BI /W 1 /H 1 ID \x00 EI",
	"BT /F2 9 Tf 3 Tc 2 Tw 90 Tz 12 TL 1 Ts <0041> Tj T* <00400003> Tj ET",
}

// wrapContent puts a content stream into a PDF with fonts and a form.
func wrapContent(content []byte) []byte {
	p := doctest.NewPDF()
	catalog := p.Add("<< /Type /Catalog /Pages 2 0 R >>")
	pages := p.Add("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	p.Add("<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R /F2 6 0 R >> /XObject << /Fm0 9 0 R >> >> >>")
	p.Add(doctest.Stream("", content))
	p.Add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Differences [1 /fi /uni00E9] >> >>")
	p.Add("<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /DescendantFonts [7 0 R] /ToUnicode 8 0 R >>")
	p.Add("<< /Type /Font /Subtype /CIDFontType2 /DW 500 /W [3 [250] 32 48 600] >>")
	p.Add(doctest.Stream("", []byte("1 begincodespacerange <0000> <FFFF> endcodespacerange 1 beginbfchar <0003> <0020> endbfchar 1 beginbfrange <0020> <0030> <0041> endbfrange 1 beginbfrange <0040> <0041> [<D83DDE00> <00660069>] endbfrange")))
	p.Add(doctest.Stream("/Type /XObject /Subtype /Form /Resources << /Font << /F1 5 0 R >> >>", []byte("BT /F1 8 Tf (form) Tj ET")))
	_ = pages
	return p.Bytes(fmt.Sprintf("/Root %d 0 R", catalog))
}

func pdfSeeds() [][]byte {
	var seeds [][]byte
	p, root := doctest.SimplePDF(doctest.TextPage("Hello, fuzz.", "Second line"), "BT /F1 12 Tf [(A)-300(B)] TJ ET")
	seeds = append(seeds, p.Bytes(fmt.Sprintf("/Root %d 0 R", root)))
	q, root2 := doctest.SimplePDF(doctest.TextPage("Object streams"))
	q.Set(4, doctest.Stream("/Filter /FlateDecode", doctest.Deflate([]byte(doctest.TextPage("Object streams")))))
	seeds = append(seeds, q.BytesObjStm(fmt.Sprintf("/Root %d 0 R", root2)))
	full := seeds[0]
	seeds = append(seeds, full[:len(full)/2])
	return seeds
}

// TestWriteFuzzSeeds writes the seeds above into testdata/fuzz when
// NIBBLE_WRITE_FUZZ_SEEDS=1, in the format go test -fuzz reads.
func TestWriteFuzzSeeds(t *testing.T) {
	doctest.SkipUnlessWritingSeeds(t)
	for i, s := range pdfSeeds() {
		doctest.WriteFuzzSeed(t, "FuzzExtractPDF", i, s)
	}
	for i, c := range contentSeeds {
		doctest.WriteFuzzSeed(t, "FuzzExtractPDF", 10+i, []byte(c))
	}
	// Hostile shapes as seeds too.
	p, root := doctest.SimplePDF("")
	p.Set(4, doctest.Stream("/Filter /FlateDecode", doctest.Deflate([]byte(strings.Repeat("[", 300)+"(x) Tj"))))
	doctest.WriteFuzzSeed(t, "FuzzExtractPDF", 3, p.Bytes(fmt.Sprintf("/Root %d 0 R", root)))
	doctest.WriteFuzzSeed(t, "FuzzExtractPDF", 4, encryptedPDF(t, ""))
}
