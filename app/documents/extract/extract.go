// Package extract turns a file a user attaches to a chat (text, Markdown,
// source code, HTML, PDF, DOCX, CSV, JSON) into a documents.Document. Its
// extension and contents decide the format; each format has its own reader
// (the PDF reader is the pdf package).
//
// Every file is treated as hostile: sizes, decompressed bytes, compression
// ratios and nesting depths are bounded (documents.Limits), and a malformed
// file gives an error, never a panic.
package extract

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"nibble/app/documents"
	"nibble/app/documents/extract/pdf"
)

// Read reads the document named name (its extension and contents decide
// the kind) of size bytes from r. Its errors wrap the documents.Err values.
func Read(name string, r io.ReaderAt, size int64, limits documents.Limits) (*documents.Document, error) {
	doc, err := extract(name, r, size, limits.WithDefaults())
	if err != nil {
		err = fmt.Errorf("documents: %s: %w", quoteName(name), err)
		if !utf8.ValidString(err.Error()) { // a parser quoted bytes of the file
			err = validUTF8Error{err}
		}
		return nil, err
	}
	return doc, nil
}

// validUTF8Error shows an error's message with invalid UTF-8 replaced, for
// messages that quote bytes of a file; errors.Is still sees the original.
type validUTF8Error struct{ err error }

func (e validUTF8Error) Error() string { return strings.ToValidUTF8(e.err.Error(), "\uFFFD") }
func (e validUTF8Error) Unwrap() error { return e.err }

// Bytes is Read on a byte slice.
func Bytes(name string, data []byte, limits documents.Limits) (*documents.Document, error) {
	return Read(name, bytesReaderAt(data), int64(len(data)), limits)
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func quoteName(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return fmt.Sprintf("%q", name)
}

func extract(name string, r io.ReaderAt, size int64, lim documents.Limits) (*documents.Document, error) {
	if r == nil {
		return nil, errors.New("no reader")
	}
	if size < 0 {
		return nil, fmt.Errorf("negative size %d", size)
	}
	if size > lim.MaxFileBytes {
		return nil, fmt.Errorf("%w: %s", documents.ErrTooLarge, documents.FileTooLarge(size, lim.MaxFileBytes))
	}
	if size == 0 {
		return nil, documents.Empty(0)
	}
	data := make([]byte, size)
	n, err := r.ReadAt(data, 0)
	if n < len(data) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the file ended after %d of %d bytes", documents.ErrDamaged, n, size)
		}
		return nil, fmt.Errorf("reading: %w", err)
	}
	kind, lang, err := detect(name, data)
	if err != nil {
		return nil, err
	}
	var doc *documents.Document
	switch kind {
	case documents.KindPDF:
		doc, err = pdf.Extract(data, lim)
	case documents.KindDOCX:
		doc, err = extractDOCX(data, lim)
	case documents.KindHTML:
		doc, err = extractHTML(data, lim)
	default:
		doc, err = extractPlain(kind, data, lim)
	}
	if err != nil {
		return nil, err
	}
	doc.Name = name
	doc.Kind = kind
	doc.Language = lang
	if !utf8.ValidString(doc.Text) { // every extractor promises this; keep the promise here too
		doc.Text = strings.ToValidUTF8(doc.Text, "\uFFFD")
	}
	if len(doc.Text) > lim.MaxTextBytes {
		return nil, documents.TextTooLarge(len(doc.Text), lim)
	}
	if strings.TrimSpace(doc.Text) == "" {
		// A PDF or .docx without text says so itself (ErrNoText); any
		// other file with nothing but blank space is empty.
		if kind == documents.KindHTML {
			return nil, fmt.Errorf("%w (the page has no visible text): nothing to attach", documents.ErrEmpty)
		}
		return nil, documents.Empty(size)
	}
	doc.IndexLines()
	return doc, nil
}
