// Package inflate bounds what one document may decompress: the zip entries
// of a .docx and the streams of a PDF share one budget per document.
package inflate

import (
	"fmt"
	"io"

	"nibble/app/documents"
)

// ratioFloor is how far a stream must inflate before its compression ratio
// is checked: small streams of repeated bytes legitimately compress well.
const ratioFloor = 1 << 20

// Budget counts decompressed bytes across one document against its
// MaxInflatedBytes and MaxRatio.
type Budget struct {
	lim  documents.Limits
	used int64
}

// NewBudget is an empty budget under lim (its defaults filled in).
func NewBudget(lim documents.Limits) *Budget {
	return &Budget{lim: lim.WithDefaults()}
}

// Reader wraps r, the decompressed data of a stream of compressed bytes,
// so that reading fails with ErrLimit once the document's decompressed total
// passes MaxInflatedBytes or this stream's ratio passes MaxRatio. consumed
// reports how many compressed bytes have been read so far, so that a bomb
// is caught after its first megabyte, not after its whole size times the
// ratio. what names the stream in errors.
func (b *Budget) Reader(r io.Reader, consumed func() int64, what string) io.Reader {
	return &budgetReader{r: r, b: b, consumed: consumed, what: what}
}

// Charge counts n more bytes against the total (for work that costs like
// inflating, such as interpreting the same data again) and reports whether
// the total is still within MaxInflatedBytes.
func (b *Budget) Charge(n int64) bool {
	b.used += n
	return b.used <= b.lim.MaxInflatedBytes
}

type budgetReader struct {
	r        io.Reader
	b        *Budget
	consumed func() int64
	n        int64
	what     string
	err      error
}

func (l *budgetReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	// Never read more than the budget allows plus one byte, so that going
	// over is noticed without inflating further.
	left := l.b.lim.MaxInflatedBytes - l.b.used + 1
	if left <= 0 {
		left = 1
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	l.b.used += int64(n)
	if l.b.used > l.b.lim.MaxInflatedBytes {
		l.err = fmt.Errorf("%w: %s: decompressed data passed the %s limit (a decompression bomb?)", documents.ErrLimit, l.what, documents.HumanBytes(l.b.lim.MaxInflatedBytes))
		return 0, l.err
	}
	if c := l.consumed(); l.n > ratioFloor && l.n > c*l.b.lim.MaxRatio {
		l.err = fmt.Errorf("%w: %s: compression ratio above %d:1 (%s from %s; a decompression bomb?)", documents.ErrLimit, l.what, l.b.lim.MaxRatio, documents.HumanBytes(l.n), documents.HumanBytes(c))
		return 0, l.err
	}
	return n, err
}
