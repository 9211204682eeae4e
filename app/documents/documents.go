// Package documents is what a document attached to a chat is once read: its
// text, kind, pages and warnings (Document), and the bounds on reading one
// (Limits, the errors extraction wraps).
//
// Two packages do the work: extract turns files (text, Markdown, source
// code, HTML, PDF, DOCX, CSV, JSON) into a Document; retrieve decides how
// documents go into the model's context: whole when they fit, else the
// passages most relevant to the question, with citations (pages or lines).
//
// Nothing is dropped silently: a Document carries warnings for anything that
// was repaired or skipped, and a retrieval plan says per document whether it
// went in whole or which parts were used.
package documents

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kind is the format a document was read as.
type Kind string

// Document kinds.
const (
	KindText     Kind = "text"
	KindMarkdown Kind = "markdown"
	KindCode     Kind = "code"
	KindHTML     Kind = "html"
	KindPDF      Kind = "pdf"
	KindDOCX     Kind = "docx"
	KindCSV      Kind = "csv"
	KindJSON     Kind = "json"
)

// Errors that extraction wraps; test with errors.Is. The wrapping error's text
// says what was wrong with which file.
var (
	// ErrUnsupported: a format Nibble does not read (images, archives,
	// spreadsheets, legacy .doc, ...).
	ErrUnsupported = errors.New("unsupported document format")
	// ErrBinary: the content is binary data, not text (e.g. a renamed file).
	ErrBinary = errors.New("binary content, not text")
	// ErrTooLarge: the file or its extracted text is over a size limit.
	ErrTooLarge = errors.New("document too large")
	// ErrLimit: decompression or nesting went over a limit (a zip bomb, a
	// decompression bomb, absurdly deep nesting).
	ErrLimit = errors.New("document exceeds a safety limit")
	// ErrEncrypted: the document needs a password.
	ErrEncrypted = errors.New("document is encrypted")
	// ErrDamaged: the file is malformed or truncated.
	ErrDamaged = errors.New("document is damaged")
	// ErrNoText: the document has no extractable text, e.g. a scanned PDF
	// whose pages are images.
	ErrNoText = errors.New("document has no text")
	// ErrEmpty: the file is empty, or its text is only blank space: there
	// is nothing to ask about.
	ErrEmpty = errors.New("the document is empty")
)

// Limits bound what extraction may read and allocate. Extraction treats
// every file as hostile: sizes, decompressed bytes, compression ratios and
// nesting depths are bounded, and a malformed file gives an error, never a
// panic. A zero field takes its
// default (DefaultLimits).
type Limits struct {
	// MaxFileBytes is the largest file accepted.
	MaxFileBytes int64
	// MaxTextBytes is the most extracted text (UTF-8 bytes) accepted; a
	// document with more is refused, not cut.
	MaxTextBytes int
	// MaxInflatedBytes bounds the bytes decompressed from one file: zip
	// entries of a .docx, PDF streams (every time they are decoded).
	MaxInflatedBytes int64
	// MaxRatio bounds the compression ratio of a zip entry or PDF stream,
	// checked once it has inflated past 1 MiB.
	MaxRatio int64
	// MaxDepth bounds element nesting in DOCX XML and object nesting in PDF.
	MaxDepth int
	// MaxPages bounds the pages of a PDF.
	MaxPages int
}

// UserLimits are the limits of a document whose size the user chose:
// maxBytes bounds both the file and the text read from it, so that one
// number, shown where it is set, says what is refused (0 or less: the
// defaults). The file's size is checked before it is read.
func UserLimits(maxBytes int64) Limits {
	if maxBytes <= 0 {
		return DefaultLimits()
	}
	return Limits{MaxFileBytes: maxBytes, MaxTextBytes: int(min(maxBytes, math.MaxInt32))}.WithDefaults()
}

// DefaultLimits are the limits a zero Limits means.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:     64 << 20,
		MaxTextBytes:     16 << 20,
		MaxInflatedBytes: 256 << 20,
		MaxRatio:         200,
		MaxDepth:         256,
		MaxPages:         10000,
	}
}

// WithDefaults is l with every zero (or negative) field set to its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxInflatedBytes <= 0 {
		l.MaxInflatedBytes = d.MaxInflatedBytes
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = d.MaxRatio
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxPages <= 0 {
		l.MaxPages = d.MaxPages
	}
	return l
}

// PageSpan is where one PDF page's text lies in Document.Text: bytes
// [Start, End). Number is 1-based.
type PageSpan struct {
	Number     int
	Start, End int
}

// Document is an extracted document: its text and where things are in it.
type Document struct {
	// Name is the file name the document was read from.
	Name string
	// Kind is the format the file was read as.
	Kind Kind
	// Language names the programming language of source code ("go",
	// "python", ...); empty for other kinds.
	Language string
	// Title is the document's own title where it has one (HTML <title>,
	// PDF /Title), else empty.
	Title string
	// Text is the extracted text, valid UTF-8 with "\n" line ends.
	Text string
	// Pages is set for PDFs: every page in order, with its byte range in
	// Text (a page without text has an empty range).
	Pages []PageSpan
	// Warnings lists what was repaired, skipped or guessed, in words a
	// user can read.
	Warnings []string

	lineStarts []int // byte offset of each line's start; lineStarts[0] == 0
}

// NewDocument makes a Document from text that is already extracted (for
// callers that have text from elsewhere, and for tests). Invalid UTF-8 is
// replaced with U+FFFD, with a warning.
func NewDocument(name string, kind Kind, text string) *Document {
	d := &Document{Name: name, Kind: kind}
	if !utf8.ValidString(text) {
		d.Warnings = append(d.Warnings, "invalid UTF-8 replaced with U+FFFD")
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	d.Text = text
	d.IndexLines()
	return d
}

// IndexLines records where Text's lines start, for LineAt and LineStarts;
// an extractor calls it once Text is final.
func (d *Document) IndexLines() {
	d.lineStarts = lineStarts(d.Text)
}

func lineStarts(s string) []int {
	starts := make([]int, 1, 1+strings.Count(s, "\n"))
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && i+1 < len(s) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// Lines is the number of lines in Text.
func (d *Document) Lines() int { return len(d.LineStarts()) }

// LineStarts is the byte offset of each line's start in Text (the first is
// 0). The slice is the document's own: callers must not modify it.
func (d *Document) LineStarts() []int {
	if d.lineStarts == nil {
		return lineStarts(d.Text)
	}
	return d.lineStarts
}

// LineAt is the 1-based line holding byte offset off of Text.
func (d *Document) LineAt(off int) int {
	starts := d.LineStarts()
	// The last start <= off.
	i := sort.Search(len(starts), func(i int) bool { return starts[i] > off })
	if i == 0 {
		return 1
	}
	return i
}

// PageAt is the 1-based page holding byte offset off of Text, or 0 when the
// document has no pages.
func (d *Document) PageAt(off int) int {
	if len(d.Pages) == 0 {
		return 0
	}
	i := sort.Search(len(d.Pages), func(i int) bool { return d.Pages[i].End > off })
	if i == len(d.Pages) {
		i = len(d.Pages) - 1
	}
	// Skip empty pages that end exactly at off.
	for i < len(d.Pages)-1 && d.Pages[i].Start == d.Pages[i].End {
		i++
	}
	return d.Pages[i].Number
}

// MaxFile is the largest file l accepts: MaxFileBytes, or its default.
func (l Limits) MaxFile() int64 { return l.WithDefaults().MaxFileBytes }

// FileTooLarge says that a file of size bytes is over the limit of max
// bytes: "the file is 2 MiB, over the 1 MiB limit for documents".
func FileTooLarge(size, max int64) string {
	return fmt.Sprintf("the file is %s, over the %s limit for documents", HumanBytes(size), HumanBytes(max))
}

// TextTooLarge is the ErrTooLarge error for n bytes of extracted text over
// lim's MaxTextBytes.
func TextTooLarge(n int, lim Limits) error {
	return fmt.Errorf("%w: its text is %s, over the %s limit for documents", ErrTooLarge, HumanBytes(int64(n)), HumanBytes(int64(lim.MaxTextBytes)))
}

// Empty is the ErrEmpty error for a file of size bytes whose text is
// blank: "the document is empty (0 bytes)", "... (only blank space)".
func Empty(size int64) error {
	if size == 0 {
		return fmt.Errorf("%w (0 bytes): nothing to attach", ErrEmpty)
	}
	return fmt.Errorf("%w (only spaces and line breaks): nothing to attach", ErrEmpty)
}

// HumanBytes formats n as "512 bytes", "3.2 KiB", "64 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	suffix := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[exp]
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
