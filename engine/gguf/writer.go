package gguf

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/bits"

	"nibble/engine/ggml"
	"nibble/internal/atomicfile"
)

// Writer builds a GGUF file (version 3). Metadata and tensor descriptions
// are collected first; Write then streams the header and asks each tensor's
// fill function for its bytes one tensor at a time, so a large model never
// sits in memory whole.
type Writer struct {
	keys    []string
	kv      map[string]Value
	tensors []pendingTensor
	names   map[string]bool
}

type pendingTensor struct {
	info TensorInfo
	fill func(dst []byte) error
}

// NewWriter returns an empty writer: version 3, alignment 32 unless
// general.alignment is set.
func NewWriter() *Writer {
	return &Writer{kv: map[string]Value{}, names: map[string]bool{}}
}

// Set stores a metadata value from a Go value: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64, a slice of
// any of those, a Value or a []Value (array of arrays). int and uint are
// refused because GGUF readers check exact widths (llama.cpp fails on a u64
// where it expects a u32). Setting a key again replaces its value in place.
func (w *Writer) Set(key string, v any) error {
	val, err := toValue(v)
	if err != nil {
		return fmt.Errorf("gguf: set %q: %w", key, err)
	}
	if key == "" {
		return fmt.Errorf("gguf: set: empty key")
	}
	w.SetValue(key, val)
	return nil
}

// SetValue stores v as is (e.g. copied from another File). It is checked
// when the file is written.
func (w *Writer) SetValue(key string, v Value) {
	if _, ok := w.kv[key]; !ok {
		w.keys = append(w.keys, key)
	}
	w.kv[key] = v
}

// AddTensor declares a tensor of the given type and GGUF dims (ne[0]
// first). fill is called during Write with dst of exactly the tensor's byte
// size, zeroed; a nil fill writes zeros.
func (w *Writer) AddTensor(name string, typ ggml.Type, dims []uint64, fill func(dst []byte) error) error {
	where := fmt.Sprintf("gguf: add tensor %q", name)
	if len(name) >= maxNameLen {
		return fmt.Errorf("%s: name is %d bytes, limit is %d", where, len(name), maxNameLen-1)
	}
	if w.names[name] {
		return fmt.Errorf("%s: duplicate tensor name", where)
	}
	if len(dims) < 1 || len(dims) > maxDims {
		return fmt.Errorf("%s: %d dims, want 1..%d", where, len(dims), maxDims)
	}
	if !typ.Known() {
		return fmt.Errorf("%s: unknown ggml type %d", where, uint32(typ))
	}
	elems := uint64(1)
	for j, d := range dims {
		hi, lo := bits.Mul64(elems, d)
		if d == 0 || hi != 0 || lo >= math.MaxInt64 {
			return fmt.Errorf("%s: bad shape %v at ne[%d]", where, dims, j)
		}
		elems = lo
	}
	block := uint64(typ.BlockSize())
	if dims[0]%block != 0 {
		return fmt.Errorf("%s: ne[0] = %d is not a multiple of the %s block size %d", where, dims[0], typ, block)
	}
	hi, size := bits.Mul64(elems/block, uint64(typ.TypeSize()))
	if hi != 0 || size > math.MaxInt {
		return fmt.Errorf("%s: shape %v of %s is too large", where, dims, typ)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{
		info: TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size},
		fill: fill,
	})
	return nil
}

// alignment is general.alignment when set, else 32.
func (w *Writer) alignment() (uint64, error) {
	v, ok := w.kv[KeyAlignment]
	if !ok {
		return defaultAlignment, nil
	}
	a, isU32 := v.Data.(uint32)
	if v.Type != Uint32 || !isU32 || a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: write: %q must be a u32 power of two, got %s %v", KeyAlignment, v.Type, v.Data)
	}
	return uint64(a), nil
}

// Write streams the file to out.
func (w *Writer) Write(out io.Writer) error {
	align, err := w.alignment()
	if err != nil {
		return err
	}
	// Offsets are assigned in declaration order, each padded to the alignment.
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		off += pad(t.Size, align)
	}
	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := &encoder{w: cw}
	e.bytes([]byte(magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.keys)))
	for _, k := range w.keys {
		e.str(k)
		v := w.kv[k]
		e.u32(uint32(v.Type))
		if err := e.value(v, 0); err != nil {
			return fmt.Errorf("gguf: write key %q: %w", k, err)
		}
	}
	for i := range w.tensors {
		t := &w.tensors[i].info
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	e.zeros(pad(cw.n, align) - cw.n)
	if e.err != nil {
		return fmt.Errorf("gguf: write header: %w", e.err)
	}
	var buf []byte
	for i := range w.tensors {
		pt := &w.tensors[i]
		if uint64(cap(buf)) < pt.info.Size {
			buf = make([]byte, pt.info.Size)
		}
		dst := buf[:pt.info.Size]
		clear(dst)
		if pt.fill != nil {
			if err := pt.fill(dst); err != nil {
				return fmt.Errorf("gguf: fill tensor %q: %w", pt.info.Name, err)
			}
		}
		e.bytes(dst)
		e.zeros(pad(pt.info.Size, align) - pt.info.Size)
		if e.err != nil {
			return fmt.Errorf("gguf: write tensor %q: %w", pt.info.Name, e.err)
		}
	}
	if err := cw.w.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

// WriteFile writes to a temporary file next to path and renames it into
// place (atomicfile), so a failed or interrupted write never leaves a
// truncated model.
func (w *Writer) WriteFile(path string) error {
	var werr error
	err := atomicfile.Write(path, 0o644, func(f io.Writer) error {
		werr = w.Write(f)
		return werr
	})
	switch {
	case werr != nil:
		return fmt.Errorf("write %s: %w", path, werr)
	case err != nil:
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	return nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

type countingWriter struct {
	w *bufio.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}
