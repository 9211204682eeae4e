// Package doctest holds what the documents packages' tests share: small
// PDFs written by hand, filler text, the properties every extraction must
// keep under fuzzing, and the writer of fuzz seed files.
package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"nibble/app/documents"
)

// FillerText is n bytes (about) of varied English-like paragraphs that never
// use the words "vault" or "code".
func FillerText(n int, seed uint32) string {
	words := strings.Fields(`the river morning garden window quietly market silver ancient harbor
		lantern meadow thunder village winter summer orchard journey kitchen mountain letter
		evening shadow whisper forest candle copper bridge stone valley meadow painter
		farmer sailor teacher island castle library station engine blanket pocket mirror`)
	var b strings.Builder
	x := seed
	next := func() uint32 { x = x*1664525 + 1013904223; return x >> 8 }
	for b.Len() < n {
		sentences := 3 + int(next()%4)
		for s := 0; s < sentences; s++ {
			k := 6 + int(next()%10)
			for i := 0; i < k; i++ {
				w := words[int(next())%len(words)]
				if i == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
				if i < k-1 {
					b.WriteByte(' ')
				}
			}
			b.WriteString(". ")
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// HasWarning reports whether one of d's warnings contains sub.
func HasWarning(d *documents.Document, sub string) bool {
	for _, w := range d.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

// FuzzLimits keep each fuzz input cheap; the properties are the same at any
// size.
var FuzzLimits = documents.Limits{
	MaxFileBytes:     1 << 20,
	MaxTextBytes:     1 << 20,
	MaxInflatedBytes: 8 << 20,
	MaxRatio:         200,
	MaxDepth:         256,
	MaxPages:         200,
}

// CheckExtract runs extract (an extraction of data under FuzzLimits) and
// checks the properties every input must keep: no panic, bounded time and
// allocation, valid UTF-8 out, page spans inside the text, an error or a
// document (never both, never neither).
func CheckExtract(t *testing.T, data []byte, extract func() (*documents.Document, error)) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	start := time.Now()
	doc, err := extract()
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
	if len(doc.Text) > FuzzLimits.MaxTextBytes {
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

// SkipUnlessWritingSeeds skips a test that rewrites testdata/fuzz unless
// NIBBLE_WRITE_FUZZ_SEEDS=1.
func SkipUnlessWritingSeeds(t *testing.T) {
	if os.Getenv("NIBBLE_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set NIBBLE_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz")
	}
}

// WriteFuzzSeed writes testdata/fuzz/<target>/seed-<i> (in the test's
// package folder) with args, in the format go test -fuzz reads.
func WriteFuzzSeed(t *testing.T, target string, i int, args ...any) {
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
