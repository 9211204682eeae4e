package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxArrayDepth bounds nested arrays so a hostile file cannot recurse deeply.
// llama.cpp itself rejects nested arrays; gguf-py can write them.
const maxArrayDepth = 8

// maxArrayLen is llama.cpp's GGUF_MAX_ARRAY_ELEMENTS.
const maxArrayLen = 1 << 30

// valueReader decodes metadata values from a source.
type valueReader struct {
	s    *source
	skip int // HeaderOptions.SkipArraysLongerThan
}

// value reads one value of type t; what names it for errors.
func (vr *valueReader) value(t ValueType, depth int, what string) (Value, error) {
	s := vr.s
	if t == Array {
		return vr.array(depth, what)
	}
	if t == String {
		str, err := s.str(what)
		return Value{Type: String, Data: str}, err
	}
	off := s.pos
	if !t.Known() {
		return Value{}, fmt.Errorf("gguf: %s at offset %d: unknown value type %d", what, off, uint32(t))
	}
	b, err := s.next(t.size(), what)
	if err != nil {
		return Value{}, err
	}
	return Value{Type: t, Data: decodeScalar(t, b)}, nil
}

func decodeScalar(t ValueType, b []byte) any {
	switch t {
	case Uint8:
		return b[0]
	case Int8:
		return int8(b[0])
	case Bool:
		return b[0] != 0 // llama.cpp reads any non-zero byte as true
	case Uint16:
		return binary.LittleEndian.Uint16(b)
	case Int16:
		return int16(binary.LittleEndian.Uint16(b))
	case Uint32:
		return binary.LittleEndian.Uint32(b)
	case Int32:
		return int32(binary.LittleEndian.Uint32(b))
	case Float32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case Uint64:
		return binary.LittleEndian.Uint64(b)
	case Int64:
		return int64(binary.LittleEndian.Uint64(b))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return nil
}

// arrayHeader reads and checks an array's element type and count: the count
// must fit in the bytes left, so no allocation below can be oversized.
func (vr *valueReader) arrayHeader(depth int, what string) (ValueType, int, error) {
	s := vr.s
	off := s.pos
	et, err := s.u32(what + " element type")
	if err != nil {
		return 0, 0, err
	}
	elem := ValueType(et)
	if !elem.Known() {
		return 0, 0, fmt.Errorf("gguf: %s at offset %d: unknown array element type %d", what, off, et)
	}
	if elem == Array && depth+1 >= maxArrayDepth {
		return 0, 0, fmt.Errorf("gguf: %s at offset %d: arrays nested deeper than %d", what, off, maxArrayDepth)
	}
	n, err := s.u64(what + " element count")
	if err != nil {
		return 0, 0, err
	}
	if n > s.remaining()/uint64(elem.minEncodedSize()) || n > maxArrayLen {
		return 0, 0, fmt.Errorf("gguf: %s at offset %d: %d elements of %s cannot fit in the %d bytes left in the file", what, off, n, elem, s.remaining())
	}
	return elem, int(n), nil
}

func (vr *valueReader) array(depth int, what string) (Value, error) {
	elem, n, err := vr.arrayHeader(depth, what)
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: Array, Elem: elem, Len: n}
	if vr.skip > 0 && n > vr.skip {
		return v, vr.skipBody(elem, n, depth, what)
	}
	v.Data, err = vr.body(elem, n, depth, what)
	return v, err
}

// skipBody passes over n elements, reading only what locates the next field
// (string lengths, nested array headers).
func (vr *valueReader) skipBody(elem ValueType, n int, depth int, what string) error {
	s := vr.s
	switch elem {
	case String:
		for i := 0; i < n; i++ {
			if err := s.skipStr(what); err != nil {
				return err
			}
		}
		return nil
	case Array:
		for i := 0; i < n; i++ {
			e, m, err := vr.arrayHeader(depth+1, what)
			if err != nil {
				return err
			}
			if err := vr.skipBody(e, m, depth+1, what); err != nil {
				return err
			}
		}
		return nil
	}
	return s.skip(uint64(n)*uint64(elem.size()), what)
}

func (vr *valueReader) body(elem ValueType, n int, depth int, what string) (any, error) {
	s := vr.s
	switch elem {
	case String:
		// All strings share one backing allocation instead of one each:
		// vocabularies hold hundreds of thousands of short strings.
		ends := make([]int, n)
		var blob []byte
		for i := range ends {
			b, err := s.strBytes(what)
			if err != nil {
				return nil, err
			}
			blob = append(blob, b...)
			ends[i] = len(blob)
		}
		all := string(blob)
		out := make([]string, n)
		start := 0
		for i, end := range ends {
			out[i] = all[start:end]
			start = end
		}
		return out, nil
	case Array:
		out := make([]Value, n)
		for i := range out {
			v, err := vr.array(depth+1, what)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	out := makeSlice(elem, n)
	size := elem.size()
	per := headerChunk / size
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		b, err := s.next((hi-lo)*size, what)
		if err != nil {
			return nil, err
		}
		decodeInto(out, lo, hi, b)
	}
	return out, nil
}

func makeSlice(t ValueType, n int) any {
	switch t {
	case Uint8:
		return make([]uint8, n)
	case Int8:
		return make([]int8, n)
	case Bool:
		return make([]bool, n)
	case Uint16:
		return make([]uint16, n)
	case Int16:
		return make([]int16, n)
	case Uint32:
		return make([]uint32, n)
	case Int32:
		return make([]int32, n)
	case Float32:
		return make([]float32, n)
	case Uint64:
		return make([]uint64, n)
	case Int64:
		return make([]int64, n)
	case Float64:
		return make([]float64, n)
	}
	return nil
}

// decodeInto fills out[lo:hi] (a slice made by makeSlice) from b.
func decodeInto(out any, lo, hi int, b []byte) {
	le := binary.LittleEndian
	switch d := out.(type) {
	case []uint8:
		copy(d[lo:hi], b)
	case []int8:
		for i := lo; i < hi; i++ {
			d[i] = int8(b[i-lo])
		}
	case []bool:
		for i := lo; i < hi; i++ {
			d[i] = b[i-lo] != 0
		}
	case []uint16:
		for i := lo; i < hi; i++ {
			d[i] = le.Uint16(b[2*(i-lo):])
		}
	case []int16:
		for i := lo; i < hi; i++ {
			d[i] = int16(le.Uint16(b[2*(i-lo):]))
		}
	case []uint32:
		for i := lo; i < hi; i++ {
			d[i] = le.Uint32(b[4*(i-lo):])
		}
	case []int32:
		for i := lo; i < hi; i++ {
			d[i] = int32(le.Uint32(b[4*(i-lo):]))
		}
	case []float32:
		for i := lo; i < hi; i++ {
			d[i] = math.Float32frombits(le.Uint32(b[4*(i-lo):]))
		}
	case []uint64:
		for i := lo; i < hi; i++ {
			d[i] = le.Uint64(b[8*(i-lo):])
		}
	case []int64:
		for i := lo; i < hi; i++ {
			d[i] = int64(le.Uint64(b[8*(i-lo):]))
		}
	case []float64:
		for i := lo; i < hi; i++ {
			d[i] = math.Float64frombits(le.Uint64(b[8*(i-lo):]))
		}
	}
}
