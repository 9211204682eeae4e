package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
)

// headerChunk is how much the reader fetches per request, so that a remote
// io.ReaderAt (HTTP range requests) sees a few large reads, not thousands of
// tiny ones.
const headerChunk = 64 << 10

// maxStringLen is llama.cpp's GGUF_MAX_STRING_LENGTH.
const maxStringLen = 1 << 30

// source is a forward cursor over a file of known size. It serves reads from
// a window of the file (the whole file when it is mapped) and refills the
// window from the io.ReaderAt only when a read leaves it, so skipped regions
// are never fetched.
type source struct {
	r      io.ReaderAt
	size   uint64
	pos    uint64
	win    []byte // file bytes [winOff, winOff+len(win))
	winOff uint64
	buf    []byte // backing store of win when reading through r
}

func newSource(r io.ReaderAt, size uint64) *source { return &source{r: r, size: size} }

// newMappedSource reads straight from an in-memory image of the whole file.
func newMappedSource(data []byte) *source {
	return &source{size: uint64(len(data)), win: data}
}

func (s *source) remaining() uint64 { return s.size - s.pos }

// errShort reports a field that runs past the end of the file.
func (s *source) errShort(what string, off uint64, n uint64) error {
	return fmt.Errorf("gguf: %s at offset %d: needs %d bytes, file has %d left: %w", what, off, n, s.size-off, io.ErrUnexpectedEOF)
}

// next returns the n bytes at the cursor and advances past them. The slice
// is valid until the next call. what names the field for errors.
func (s *source) next(n int, what string) ([]byte, error) {
	off := s.pos
	if uint64(n) > s.remaining() {
		return nil, s.errShort(what, off, uint64(n))
	}
	if off >= s.winOff && off-s.winOff+uint64(n) <= uint64(len(s.win)) {
		i := off - s.winOff
		s.pos += uint64(n)
		return s.win[i : i+uint64(n)], nil
	}
	if s.r == nil { // mapped: the window is the whole file, so this is unreachable
		return nil, s.errShort(what, off, uint64(n))
	}
	want := max(n, int(min(uint64(headerChunk), s.remaining())))
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	b := s.buf[:want]
	got, err := s.r.ReadAt(b, int64(off))
	if got < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("gguf: %s at offset %d: read %d bytes: %w", what, off, n, err)
	}
	s.win, s.winOff = b[:got], off
	s.pos += uint64(n)
	return b[:n], nil
}

// skip advances the cursor by n bytes without reading them.
func (s *source) skip(n uint64, what string) error {
	if n > s.remaining() {
		return s.errShort(what, s.pos, n)
	}
	s.pos += n
	return nil
}

func (s *source) u32(what string) (uint32, error) {
	b, err := s.next(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (s *source) u64(what string) (uint64, error) {
	b, err := s.next(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string, checking the length against the bytes
// left before allocating.
func (s *source) str(what string) (string, error) {
	b, err := s.strBytes(what)
	return string(b), err
}

// strBytes reads a length-prefixed string's bytes; the slice is valid until
// the next read.
func (s *source) strBytes(what string) ([]byte, error) {
	off := s.pos
	n, err := s.u64(what)
	if err != nil {
		return nil, err
	}
	if n > maxStringLen {
		return nil, fmt.Errorf("gguf: %s at offset %d: length %d exceeds the limit of %d", what, off, n, maxStringLen)
	}
	if n > s.remaining() {
		return nil, fmt.Errorf("gguf: %s at offset %d: length %d exceeds the %d bytes left in the file", what, off, n, s.remaining())
	}
	if n <= headerChunk || s.r == nil {
		return s.next(int(n), what)
	}
	// Long strings (chat templates) bypass the window.
	b := make([]byte, n)
	got, err := s.r.ReadAt(b, int64(s.pos))
	if uint64(got) < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("gguf: %s at offset %d: %w", what, s.pos, err)
	}
	s.pos += n
	return b, nil
}

// skipStr passes over a length-prefixed string, reading only its length.
func (s *source) skipStr(what string) error {
	off := s.pos
	n, err := s.u64(what)
	if err != nil {
		return err
	}
	if n > s.remaining() {
		return fmt.Errorf("gguf: %s at offset %d: length %d exceeds the %d bytes left in the file", what, off, n, s.remaining())
	}
	s.pos += n
	return nil
}
