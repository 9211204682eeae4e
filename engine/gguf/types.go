// Package gguf reads and writes GGUF files (llama.cpp's model format).
//
// Reading validates the header the way llama.cpp's gguf loader does, so a
// file this package accepts is one llama.cpp would accept too, and a
// malformed or hostile file yields an error naming the field and its byte
// offset, never a panic or an allocation driven by an unchecked count.
// Open maps the file read-only and hands out tensor data as views into the
// mapping; ReadHeader parses only the header from any io.ReaderAt.
package gguf

import (
	"fmt"

	"nibble/engine/ggml"
)

// ValueType is the type tag of a metadata value, numbered as in the GGUF spec.
type ValueType uint32

const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7
	String  ValueType = 8
	Array   ValueType = 9
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is one of the 13 types of the spec.
func (t ValueType) Known() bool { return t <= Float64 }

// size is the encoded size of a fixed-width value; 0 for String and Array.
func (t ValueType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// minEncodedSize is the fewest bytes one value of type t can occupy. It lets
// the reader reject an element count before allocating for it.
func (t ValueType) minEncodedSize() int {
	switch t {
	case String:
		return 8 // length prefix
	case Array:
		return 12 // element type + count
	}
	return t.size()
}

// Value is one metadata value.
//
// Data holds, by Type: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64. For Type == Array it holds a slice
// of the element type ([]uint8 ... []float64, []bool, []string) or []Value
// when the elements are themselves arrays; it is nil when the reader skipped
// the array (HeaderOptions.SkipArraysLongerThan), while Elem and Len stay set.
type Value struct {
	Type ValueType
	Elem ValueType // element type when Type == Array
	Len  int       // element count when Type == Array
	Data any
}

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ne[0] first: ne[0] is the contiguous dimension
	Type   ggml.Type
	Offset uint64 // relative to the start of the data section
	Size   uint64 // bytes
}

// Elements is the number of elements (the product of Dims).
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Fields are read-only after Open/ReadHeader.
type File struct {
	Version    uint32
	Keys       []string // metadata keys in file order
	KV         map[string]Value
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset uint64 // absolute offset of the tensor data section (header size incl. padding)

	mapping []byte         // whole file when opened with Open; nil for ReadHeader
	unmap   func() error   // releases mapping
	index   map[string]int // tensor name -> index in Tensors
}

// ElementCount is t.Elements(); kept on File for callers that hold a File.
func (f *File) ElementCount(t *TensorInfo) uint64 { return t.Elements() }

// Tensor looks a tensor up by name. The pointer stays valid while f lives.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData is the tensor's bytes as a view into the file mapping, or nil
// when f was read header-only (or t is not in bounds of the mapping).
func (f *File) TensorData(t *TensorInfo) []byte {
	if f.mapping == nil || t == nil {
		return nil
	}
	start := f.DataOffset + t.Offset
	end := start + t.Size
	if start < f.DataOffset || end < start || end > uint64(len(f.mapping)) {
		return nil
	}
	return f.mapping[start:end:end]
}

// Mapping is the whole file as mapped by Open (nil for ReadHeader): the
// region a backend makes its weight handles of, tensor t's bytes at offset
// DataOffset+t.Offset. It is read-only and valid until Close.
func (f *File) Mapping() []byte { return f.mapping }

// Close releases the mapping. Tensor data views must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	f.mapping = nil
	return err
}
