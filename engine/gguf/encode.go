package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// encoder writes little-endian GGUF primitives and keeps the first error.
type encoder struct {
	w       io.Writer
	err     error
	scratch [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.scratch[0] = v; e.bytes(e.scratch[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.scratch[:], v)
	e.bytes(e.scratch[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.scratch[:], v)
	e.bytes(e.scratch[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.scratch[:], v)
	e.bytes(e.scratch[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// value writes v's payload (its type tag is written by the caller). It
// checks that Data matches Type, so a hand-built Value cannot produce a file
// the reader would misparse.
func (e *encoder) value(v Value, depth int) error {
	if v.Type != Array {
		return e.scalar(v.Type, v.Data)
	}
	if v.Elem == Array && depth+1 >= maxArrayDepth {
		return fmt.Errorf("arrays nested deeper than %d", maxArrayDepth)
	}
	if !v.Elem.Known() {
		return fmt.Errorf("unknown array element type %d", uint32(v.Elem))
	}
	if v.Data == nil {
		return fmt.Errorf("array of %d %s has no data (was it skipped when read?)", v.Len, v.Elem)
	}
	n := sliceLen(v.Data)
	if n < 0 || n != v.Len {
		return fmt.Errorf("array of %s: Len %d does not match data %T of length %d", v.Elem, v.Len, v.Data, n)
	}
	e.u32(uint32(v.Elem))
	e.u64(uint64(n))
	switch d := v.Data.(type) {
	case []string:
		if v.Elem != String {
			break
		}
		for _, s := range d {
			e.str(s)
		}
		return e.err
	case []Value:
		if v.Elem != Array {
			break
		}
		for i, x := range d {
			if x.Type != Array {
				return fmt.Errorf("element %d of an array of arrays is a %s", i, x.Type)
			}
			// Elements carry no type tag of their own (as gguf-py writes them).
			if err := e.value(x, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		return e.err
	default:
		if st, ok := sliceType(v.Data); ok && st == v.Elem {
			e.numbers(v.Data)
			return e.err
		}
	}
	return fmt.Errorf("array of %s holds %T", v.Elem, v.Data)
}

func (e *encoder) scalar(t ValueType, x any) error {
	switch v := x.(type) {
	case uint8:
		if t == Uint8 {
			e.u8(v)
			return e.err
		}
	case int8:
		if t == Int8 {
			e.u8(uint8(v))
			return e.err
		}
	case bool:
		if t == Bool {
			e.u8(b2u(v))
			return e.err
		}
	case uint16:
		if t == Uint16 {
			e.u16(v)
			return e.err
		}
	case int16:
		if t == Int16 {
			e.u16(uint16(v))
			return e.err
		}
	case uint32:
		if t == Uint32 {
			e.u32(v)
			return e.err
		}
	case int32:
		if t == Int32 {
			e.u32(uint32(v))
			return e.err
		}
	case float32:
		if t == Float32 {
			e.u32(math.Float32bits(v))
			return e.err
		}
	case uint64:
		if t == Uint64 {
			e.u64(v)
			return e.err
		}
	case int64:
		if t == Int64 {
			e.u64(uint64(v))
			return e.err
		}
	case float64:
		if t == Float64 {
			e.u64(math.Float64bits(v))
			return e.err
		}
	case string:
		if t == String {
			e.str(v)
			return e.err
		}
	}
	return fmt.Errorf("value of type %s holds %T", t, x)
}

// numbers writes a fixed-width slice in blocks, not one Write per element.
func (e *encoder) numbers(s any) {
	const blockElems = 4096
	var buf [blockElems * 8]byte
	le := binary.LittleEndian
	n := sliceLen(s)
	for lo := 0; lo < n; lo += blockElems {
		hi := min(n, lo+blockElems)
		var b []byte
		switch d := s.(type) {
		case []uint8:
			b = d[lo:hi]
		case []int8:
			for i, v := range d[lo:hi] {
				buf[i] = uint8(v)
			}
			b = buf[:hi-lo]
		case []bool:
			for i, v := range d[lo:hi] {
				buf[i] = b2u(v)
			}
			b = buf[:hi-lo]
		case []uint16:
			for i, v := range d[lo:hi] {
				le.PutUint16(buf[2*i:], v)
			}
			b = buf[:2*(hi-lo)]
		case []int16:
			for i, v := range d[lo:hi] {
				le.PutUint16(buf[2*i:], uint16(v))
			}
			b = buf[:2*(hi-lo)]
		case []uint32:
			for i, v := range d[lo:hi] {
				le.PutUint32(buf[4*i:], v)
			}
			b = buf[:4*(hi-lo)]
		case []int32:
			for i, v := range d[lo:hi] {
				le.PutUint32(buf[4*i:], uint32(v))
			}
			b = buf[:4*(hi-lo)]
		case []float32:
			for i, v := range d[lo:hi] {
				le.PutUint32(buf[4*i:], math.Float32bits(v))
			}
			b = buf[:4*(hi-lo)]
		case []uint64:
			for i, v := range d[lo:hi] {
				le.PutUint64(buf[8*i:], v)
			}
			b = buf[:8*(hi-lo)]
		case []int64:
			for i, v := range d[lo:hi] {
				le.PutUint64(buf[8*i:], uint64(v))
			}
			b = buf[:8*(hi-lo)]
		case []float64:
			for i, v := range d[lo:hi] {
				le.PutUint64(buf[8*i:], math.Float64bits(v))
			}
			b = buf[:8*(hi-lo)]
		}
		e.bytes(b)
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// sliceType is the element ValueType of a fixed-width slice.
func sliceType(s any) (ValueType, bool) {
	switch s.(type) {
	case []uint8:
		return Uint8, true
	case []int8:
		return Int8, true
	case []bool:
		return Bool, true
	case []uint16:
		return Uint16, true
	case []int16:
		return Int16, true
	case []uint32:
		return Uint32, true
	case []int32:
		return Int32, true
	case []float32:
		return Float32, true
	case []uint64:
		return Uint64, true
	case []int64:
		return Int64, true
	case []float64:
		return Float64, true
	}
	return 0, false
}

// toValue maps a Go value to a Value for Writer.Set.
func toValue(x any) (Value, error) {
	switch v := x.(type) {
	case Value:
		return v, nil
	case uint8:
		return Value{Type: Uint8, Data: v}, nil
	case int8:
		return Value{Type: Int8, Data: v}, nil
	case bool:
		return Value{Type: Bool, Data: v}, nil
	case uint16:
		return Value{Type: Uint16, Data: v}, nil
	case int16:
		return Value{Type: Int16, Data: v}, nil
	case uint32:
		return Value{Type: Uint32, Data: v}, nil
	case int32:
		return Value{Type: Int32, Data: v}, nil
	case float32:
		return Value{Type: Float32, Data: v}, nil
	case uint64:
		return Value{Type: Uint64, Data: v}, nil
	case int64:
		return Value{Type: Int64, Data: v}, nil
	case float64:
		return Value{Type: Float64, Data: v}, nil
	case string:
		return Value{Type: String, Data: v}, nil
	case []string:
		return Value{Type: Array, Elem: String, Len: len(v), Data: v}, nil
	case []Value:
		return Value{Type: Array, Elem: Array, Len: len(v), Data: v}, nil
	case int, uint:
		return Value{}, fmt.Errorf("%T has no fixed GGUF width; use a sized type such as uint32 or int64", x)
	}
	if t, ok := sliceType(x); ok {
		return Value{Type: Array, Elem: t, Len: sliceLen(x), Data: x}, nil
	}
	return Value{}, fmt.Errorf("unsupported Go type %T", x)
}
