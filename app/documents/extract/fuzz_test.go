package extract

import (
	"strings"
	"testing"

	"nibble/app/documents"
	"nibble/app/documents/internal/doctest"
)

// checkExtract runs Bytes on data under the fuzz limits and checks the
// properties every input must keep (doctest.CheckExtract).
func checkExtract(t *testing.T, name string, data []byte) {
	doctest.CheckExtract(t, data, func() (*documents.Document, error) {
		return Bytes(name, data, doctest.FuzzLimits)
	})
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
	doctest.SkipUnlessWritingSeeds(t)
	for i, s := range docxSeeds(t) {
		doctest.WriteFuzzSeed(t, "FuzzExtractDOCX", i, s)
	}
	doctest.WriteFuzzSeed(t, "FuzzExtractDOCX", 2, zipRaw(t, "word/document.xml", deflateRepeat(t, 4), 4<<20, 0))
	for i, s := range htmlSeeds() {
		doctest.WriteFuzzSeed(t, "FuzzExtractHTML", i, s)
	}
}
