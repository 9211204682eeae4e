package extract

import (
	"archive/zip"
	"bufio"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"nibble/app/documents"
	"nibble/app/documents/extract/internal/inflate"
)

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

// openZipEntry returns the decompressed contents of f as a stream. It does
// its own inflating under the budget and never trusts the sizes in the zip
// headers for anything but a final consistency check (see zipEntryReader).
func openZipEntry(f *zip.File, b *inflate.Budget) (io.Reader, error) {
	if f.Flags&0x1 != 0 {
		return nil, fmt.Errorf("%w: %s is encrypted inside the zip archive", documents.ErrEncrypted, f.Name)
	}
	raw, err := f.OpenRaw()
	if err != nil {
		return nil, fmt.Errorf("%w: opening %s in the zip archive: %v", documents.ErrDamaged, f.Name, err)
	}
	counted := newCountingReader(raw)
	var r io.Reader
	switch f.Method {
	case zip.Store:
		r = counted
	case zip.Deflate:
		r = flate.NewReader(counted)
	default:
		return nil, fmt.Errorf("%w: %s uses zip compression method %d, which is not supported", documents.ErrUnsupported, f.Name, f.Method)
	}
	return &zipEntryReader{
		r:    b.Reader(r, counted.count, f.Name),
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
		return 0, fmt.Errorf("%w: %s inflates past the %d bytes the archive declares (a zip bomb?)", documents.ErrLimit, z.f.Name, z.f.UncompressedSize64)
	}
	if errors.Is(err, io.EOF) {
		if z.f.CRC32 != 0 && z.hash.Sum32() != z.f.CRC32 {
			return n, fmt.Errorf("%w: %s: checksum mismatch (the archive is corrupt)", documents.ErrDamaged, z.f.Name)
		}
		if uint64(z.n) != z.f.UncompressedSize64 {
			return n, fmt.Errorf("%w: %s inflated to %d bytes but the archive says %d", documents.ErrDamaged, z.f.Name, z.n, z.f.UncompressedSize64)
		}
		return n, io.EOF
	}
	if err != nil && !errors.Is(err, documents.ErrLimit) && !errors.Is(err, documents.ErrDamaged) {
		err = fmt.Errorf("%w: reading %s: %v", documents.ErrDamaged, z.f.Name, err)
	}
	return n, err
}

// readZipEntry reads a whole (small) entry, at most max bytes.
func readZipEntry(f *zip.File, b *inflate.Budget, max int64) ([]byte, error) {
	r, err := openZipEntry(f, b)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s is over %s", documents.ErrLimit, f.Name, documents.HumanBytes(max))
	}
	return data, nil
}
