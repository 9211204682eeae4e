package extract

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"nibble/app/documents"
	"nibble/app/documents/internal/doctest"
)

func TestExtractTextKinds(t *testing.T) {
	for _, c := range []struct {
		name, content string
		kind          documents.Kind
		lang          string
	}{
		{"notes.txt", "hello\nworld\n", documents.KindText, ""},
		{"README.md", "# Title\n\nSome *text*.\n", documents.KindMarkdown, ""},
		{"main.go", "package main\n\nfunc main() {}\n", documents.KindCode, "go"},
		{"script.py", "print('hi')\n", documents.KindCode, "python"},
		{"app.tsx", "export const A = () => null\n", documents.KindCode, "typescript"},
		{"lib.rs", "fn main() {}\n", documents.KindCode, "rust"},
		{"Main.kt", "fun main() {}\n", documents.KindCode, "kotlin"},
		{"run.sh", "#!/bin/sh\necho hi\n", documents.KindCode, "shell"},
		{"q.sql", "SELECT 1;\n", documents.KindCode, "sql"},
		{"View.swift", "import SwiftUI\n", documents.KindCode, "swift"},
		{"x.cpp", "int main() {}\n", documents.KindCode, "cpp"},
		{"Makefile", "all:\n\techo hi\n", documents.KindCode, "makefile"},
		{"data.csv", "a,b\n1,2\n", documents.KindCSV, ""},
		{"data.json", `{"a": [1, 2]}`, documents.KindJSON, ""},
		{"page.html", "<p>Hi</p>", documents.KindHTML, ""},
		{"no-extension", "<!DOCTYPE html><title>T</title><p>Hi</p>", documents.KindHTML, ""},
		{"unknown.xyz", "plain words", documents.KindText, ""},
	} {
		doc, err := Bytes(c.name, []byte(c.content), documents.Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if doc.Kind != c.kind || doc.Language != c.lang || doc.Name != c.name {
			t.Errorf("%s: kind %q language %q name %q, want %q %q", c.name, doc.Kind, doc.Language, doc.Name, c.kind, c.lang)
		}
		if c.kind != documents.KindHTML && doc.Text != c.content {
			t.Errorf("%s: text %q, want the file as it is", c.name, doc.Text)
		}
	}
}

func TestExtractTextLinesAndNewlines(t *testing.T) {
	doc := mustExtract(t, "crlf.txt", []byte("\xef\xbb\xbfone\r\ntwo\rthree\n"))
	if doc.Text != "one\ntwo\nthree\n" {
		t.Errorf("text %q", doc.Text)
	}
	if doc.Lines() != 3 || doc.LineAt(0) != 1 || doc.LineAt(4) != 2 || doc.LineAt(len(doc.Text)-1) != 3 {
		t.Errorf("lines %d, LineAt(4)=%d", doc.Lines(), doc.LineAt(4))
	}
}

func TestExtractJSONInvalidWarns(t *testing.T) {
	doc := mustExtract(t, "bad.json", []byte(`{"a": 1,}`))
	if doc.Text != `{"a": 1,}` || !doctest.HasWarning(doc, "not valid JSON") {
		t.Errorf("text %q warnings %q", doc.Text, doc.Warnings)
	}
	doc = mustExtract(t, "log.jsonl", []byte("{\"a\":1}\n{\"b\":2}\n"))
	if len(doc.Warnings) != 0 {
		t.Errorf("JSON Lines: warnings %q", doc.Warnings)
	}
}

func TestExtractBinaryRenamedTxt(t *testing.T) {
	// A PNG renamed .txt: refused by its signature.
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2, 0xff}, 100)...)
	if _, err := Bytes("photo.txt", png, documents.Limits{}); !errors.Is(err, documents.ErrBinary) || !strings.Contains(err.Error(), "PNG") {
		t.Errorf("PNG as .txt: %v", err)
	}
	// Unknown binary: NUL bytes.
	bin := []byte("SOMEHEADER\x00\x00\x01\x02binary\x00data")
	if _, err := Bytes("data.txt", bin, documents.Limits{}); !errors.Is(err, documents.ErrBinary) || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("binary as .txt: %v", err)
	}
	// Mostly invalid UTF-8 high bytes mixed with valid sequences: binary.
	var noise []byte
	for i := 0; i < 4000; i++ {
		noise = append(noise, byte(0x80+i%64), 'a')
	}
	noise = append(noise, "é"...)
	if _, err := Bytes("noise.txt", noise, documents.Limits{}); !errors.Is(err, documents.ErrBinary) {
		t.Errorf("noise as .txt: %v", err)
	}
	// Control characters everywhere.
	ctl := bytes.Repeat([]byte("a\x01\x02\x03\x04"), 100)
	if _, err := Bytes("ctl.txt", ctl, documents.Limits{}); !errors.Is(err, documents.ErrBinary) {
		t.Errorf("control characters: %v", err)
	}
	// Other formats by signature, whatever the name.
	for name, data := range map[string][]byte{
		"a.txt":  []byte("\x7fELF\x02\x01\x01\x00\x00\x00"),
		"b.md":   []byte("SQLite format 3\x00...."),
		"c.docx": []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1...."),
		"d.doc":  []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1...."),
	} {
		if _, err := Bytes(name, data, documents.Limits{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestExtractInvalidUTF8(t *testing.T) {
	// Mostly UTF-8 with two stray bytes: repaired, with a warning.
	doc := mustExtract(t, "mixed.txt", []byte("naïve café \xff and \xfe end"))
	if doc.Text != "naïve café \uFFFD and \uFFFD end" || !doctest.HasWarning(doc, "2 invalid UTF-8 sequences") {
		t.Errorf("text %q warnings %q", doc.Text, doc.Warnings)
	}
	// Latin-1 text (no valid multi-byte sequence at all): Windows-1252.
	doc = mustExtract(t, "latin1.txt", []byte("caf\xe9 \x93quoted\x94 na\xefve"))
	if doc.Text != "café “quoted” naïve" || !doctest.HasWarning(doc, "Windows-1252") {
		t.Errorf("text %q warnings %q", doc.Text, doc.Warnings)
	}
}

func TestExtractUTF16(t *testing.T) {
	le := []byte{0xff, 0xfe}
	be := []byte{0xfe, 0xff}
	for _, r := range "Grüße\n" {
		le = append(le, byte(r), byte(r>>8))
		be = append(be, byte(r>>8), byte(r))
	}
	for name, data := range map[string][]byte{"le.txt": le, "be.txt": be, "nobom.txt": le[2:]} {
		doc, err := Bytes(name, data, documents.Limits{})
		if err != nil || doc.Text != "Grüße\n" {
			t.Errorf("%s: %q, %v", name, docText(doc), err)
		}
	}
}

func docText(d *documents.Document) string {
	if d == nil {
		return ""
	}
	return d.Text
}

func TestExtractLimits(t *testing.T) {
	lim := documents.Limits{MaxFileBytes: 1000, MaxTextBytes: 100}
	if _, err := Bytes("big.txt", bytes.Repeat([]byte("a"), 1001), lim); !errors.Is(err, documents.ErrTooLarge) || !strings.Contains(err.Error(), "1000 bytes limit") {
		t.Errorf("file over the limit: %v", err)
	}
	if _, err := Bytes("long.txt", bytes.Repeat([]byte("a"), 101), lim); !errors.Is(err, documents.ErrTooLarge) || !strings.Contains(err.Error(), "over the 100 bytes limit for documents") {
		t.Errorf("text over the limit: %v", err)
	}
	if _, err := Bytes("ok.txt", bytes.Repeat([]byte("a"), 100), lim); err != nil {
		t.Errorf("text at the limit: %v", err)
	}
	if d := documents.DefaultLimits(); d.MaxFileBytes != 64<<20 || d.MaxTextBytes != 16<<20 {
		t.Errorf("defaults %+v", d)
	}
}

// shortReader claims more bytes than it has.
type shortReader struct{ data []byte }

func (s shortReader) ReadAt(p []byte, off int64) (int, error) {
	return bytesReaderAt(s.data).ReadAt(p, off)
}

func TestExtractShortFile(t *testing.T) {
	_, err := Read("x.txt", shortReader{[]byte("abc")}, 10, documents.Limits{})
	if !errors.Is(err, documents.ErrDamaged) {
		t.Errorf("short read: %v", err)
	}
	if _, err := Read("x.txt", nil, 0, documents.Limits{}); err == nil {
		t.Error("nil reader: no error")
	}
	if _, err := Read("x.txt", shortReader{}, -1, documents.Limits{}); err == nil {
		t.Error("negative size: no error")
	}
}

func TestExtractUnsupported(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("xl/workbook.xml")
	io.WriteString(w, "<workbook/>")
	zw.Close()
	if _, err := Bytes("sheet.xlsx", b.Bytes(), documents.Limits{}); !errors.Is(err, documents.ErrUnsupported) {
		t.Errorf("xlsx: %v", err)
	}
	if _, err := Bytes("book.zip", b.Bytes(), documents.Limits{}); !errors.Is(err, documents.ErrUnsupported) {
		t.Errorf("zip: %v", err)
	}
	if _, err := Bytes("fake.pdf", []byte("hello"), documents.Limits{}); !errors.Is(err, documents.ErrDamaged) || !strings.Contains(err.Error(), "not a PDF") {
		t.Errorf("fake PDF: %v", err)
	}
}

// TestExtractLargeText reads 2 MB of text: whole, quickly, lines indexed.
func TestExtractLargeText(t *testing.T) {
	text := doctest.FillerText(2<<20, 1)
	start := time.Now()
	doc := mustExtract(t, "big.txt", []byte(text))
	if time.Since(start) > 2*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if doc.Text != text {
		t.Fatal("text changed")
	}
	if doc.Lines() != strings.Count(text, "\n") {
		t.Errorf("%d lines, want %d", doc.Lines(), strings.Count(text, "\n"))
	}
}

func mustExtract(t *testing.T, name string, data []byte) *documents.Document {
	t.Helper()
	doc, err := Bytes(name, data, documents.Limits{})
	if err != nil {
		t.Fatalf("Extract(%s): %v", name, err)
	}
	return doc
}

// An empty or blank file is refused as empty: a chip that fits whole with
// nothing in it would answer from nothing.
func TestExtractEmpty(t *testing.T) {
	for _, c := range []struct {
		name string
		data string
		want string
	}{
		{"empty.txt", "", "(0 bytes)"},
		{"blank.md", "  \n\t\n   \r\n", "only spaces and line breaks"},
		{"blank.go", "\n\n\n", "only spaces and line breaks"},
		{"bom.txt", "\xef\xbb\xbf \n", "only spaces and line breaks"},
		{"utf16.txt", "\xff\xfe \x00\n\x00", "only spaces and line breaks"},
		{"empty.csv", "", "(0 bytes)"},
	} {
		_, err := Bytes(c.name, []byte(c.data), documents.Limits{})
		if !errors.Is(err, documents.ErrEmpty) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want documents.ErrEmpty saying %q", c.name, err, c.want)
		}
	}
	if d, err := Bytes("dot.txt", []byte(" .\n"), documents.Limits{}); err != nil || d.Text != " .\n" {
		t.Errorf("a file with one visible character: %v", err)
	}
}

// One limit: the file and its text are held to the same number.
func TestUserLimits(t *testing.T) {
	lim := documents.UserLimits(1000)
	if lim.MaxFileBytes != 1000 || lim.MaxTextBytes != 1000 || lim.MaxPages != documents.DefaultLimits().MaxPages {
		t.Fatalf("UserLimits(1000) = %+v", lim)
	}
	if d := documents.UserLimits(0); d != documents.DefaultLimits() {
		t.Fatalf("UserLimits(0) = %+v", d)
	}
	// UTF-16 text grows when decoded to UTF-8: under the limit as a file, over it as text.
	u16 := append([]byte{0xff, 0xfe}, bytes.Repeat([]byte{0xac, 0x20}, 450)...) // 900 × "€", 2700 bytes of UTF-8
	if _, err := Bytes("euro.txt", u16, lim); !errors.Is(err, documents.ErrTooLarge) || !strings.Contains(err.Error(), "over the 1000 bytes limit for documents") {
		t.Errorf("text grown past the limit: %v", err)
	}
}
