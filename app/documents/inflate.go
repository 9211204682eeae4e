package documents

import (
	"archive/zip"
	"bufio"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ratioFloor is how far a stream must inflate before its compression ratio
// is checked: small streams of repeated bytes legitimately compress well.
const ratioFloor = 1 << 20

// inflateBudget counts decompressed bytes across one document.
type inflateBudget struct {
	lim  Limits
	used int64
}

// reader wraps r, the decompressed data of a stream of compressed bytes,
// so that reading fails with ErrLimit once the document's decompressed total
// passes MaxInflatedBytes or this stream's ratio passes MaxRatio. consumed
// reports how many compressed bytes have been read so far, so that a bomb
// is caught after its first megabyte, not after its whole size times the
// ratio.
func (b *inflateBudget) reader(r io.Reader, consumed func() int64, what string) *budgetReader {
	return &budgetReader{r: r, b: b, consumed: consumed, what: what}
}

type budgetReader struct {
	r        io.Reader
	b        *inflateBudget
	consumed func() int64
	n        int64
	what     string
	err      error
}

// countingReader counts the bytes read through it; it is an io.ByteReader
// so that compress/flate reads exactly what it needs and no more.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func newCountingReader(r io.Reader) *countingReader {
	return &countingReader{r: bufio.NewReader(r)}
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countingReader) count() int64 { return c.n }

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
		l.err = fmt.Errorf("%w: %s: decompressed data passed the %s limit (a decompression bomb?)", ErrLimit, l.what, humanBytes(l.b.lim.MaxInflatedBytes))
		return 0, l.err
	}
	if c := l.consumed(); l.n > ratioFloor && l.n > c*l.b.lim.MaxRatio {
		l.err = fmt.Errorf("%w: %s: compression ratio above %d:1 (%s from %s; a decompression bomb?)", ErrLimit, l.what, l.b.lim.MaxRatio, humanBytes(l.n), humanBytes(c))
		return 0, l.err
	}
	return n, err
}

// openZipEntry returns the decompressed contents of f as a stream. It does
// its own inflating under the budget and never trusts the sizes in the zip
// headers for anything but a final consistency check (see zipEntryReader).
func openZipEntry(f *zip.File, b *inflateBudget) (io.Reader, error) {
	if f.Flags&0x1 != 0 {
		return nil, fmt.Errorf("%w: %s is encrypted inside the zip archive", ErrEncrypted, f.Name)
	}
	raw, err := f.OpenRaw()
	if err != nil {
		return nil, fmt.Errorf("%w: opening %s in the zip archive: %v", ErrDamaged, f.Name, err)
	}
	counted := newCountingReader(raw)
	var r io.Reader
	switch f.Method {
	case zip.Store:
		r = counted
	case zip.Deflate:
		r = flate.NewReader(counted)
	default:
		return nil, fmt.Errorf("%w: %s uses zip compression method %d, which is not supported", ErrUnsupported, f.Name, f.Method)
	}
	return &zipEntryReader{
		r:    b.reader(r, counted.count, f.Name),
		f:    f,
		hash: crc32.NewIEEE(),
	}, nil
}

// zipEntryReader checks, at the end of an entry, that its checksum and size
// match the archive's directory.
type zipEntryReader struct {
	r    io.Reader
	f    *zip.File
	hash interface {
		io.Writer
		Sum32() uint32
	}
	n int64
}

func (z *zipEntryReader) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	z.hash.Write(p[:n])
	z.n += int64(n)
	if uint64(z.n) > z.f.UncompressedSize64 {
		return 0, fmt.Errorf("%w: %s inflates past the %d bytes the archive declares (a zip bomb?)", ErrLimit, z.f.Name, z.f.UncompressedSize64)
	}
	if errors.Is(err, io.EOF) {
		if z.f.CRC32 != 0 && z.hash.Sum32() != z.f.CRC32 {
			return n, fmt.Errorf("%w: %s: checksum mismatch (the archive is corrupt)", ErrDamaged, z.f.Name)
		}
		if uint64(z.n) != z.f.UncompressedSize64 {
			return n, fmt.Errorf("%w: %s inflated to %d bytes but the archive says %d", ErrDamaged, z.f.Name, z.n, z.f.UncompressedSize64)
		}
		return n, io.EOF
	}
	if err != nil && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrDamaged) {
		err = fmt.Errorf("%w: reading %s: %v", ErrDamaged, z.f.Name, err)
	}
	return n, err
}

// readZipEntry reads a whole (small) entry, at most max bytes.
func readZipEntry(f *zip.File, b *inflateBudget, max int64) ([]byte, error) {
	r, err := openZipEntry(f, b)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s is over %s", ErrLimit, f.Name, humanBytes(max))
	}
	return data, nil
}
