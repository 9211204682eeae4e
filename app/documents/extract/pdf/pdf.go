// Package pdf reads the text of a PDF, page by page, into a
// documents.Document.
//
// Why Nibble reads PDFs itself: the pure-Go PDF text libraries the module
// proxy offers were evaluated. github.com/ledongthuc/pdf (and
// rsc.io/pdf and github.com/dslipak/pdf, which share its code) extract page
// text, but a 200-byte PDF whose object stream contains itself crashes the
// process with a fatal stack overflow that recover cannot catch, a page tree
// with a cycle loops forever, allocations follow sizes in the file, and
// word spaces made by TJ offsets are lost ("Helloworld"). pdfcpu has no text
// extraction (only raw content streams) and would upgrade x/text and
// x/crypto for the whole module. So this package is a small reader built
// for hostile input: every loop and recursion is bounded, objects are looked
// up with cycle checks, and decoded bytes count against the document's
// budget.
package pdf

import "nibble/app/documents"

// Extract reads the text of every page of the PDF in data, within lim (a
// zero field takes its default). The Document has Kind, Title, Text, Pages
// and Warnings set; its errors wrap the documents.Err values.
func Extract(data []byte, lim documents.Limits) (*documents.Document, error) {
	doc, err := extract(data, lim.WithDefaults())
	if err != nil {
		return nil, err
	}
	doc.Kind = documents.KindPDF
	return doc, nil
}
