package mtl

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"nibble/engine/half"
	"nibble/metal/device"
	"nibble/metal/msl"
)

// constValue is one function constant as Metal takes it
// (setConstantValue:type:atIndex:): its MTLDataType and its bytes.
type constValue struct {
	index int
	typ   int
	bytes []byte
}

// encodeConstants checks the values against the constants the sources
// declare (msl.Translate's list: the same rules as the emulator) and
// encodes them; a kernel that names a required constant must get it.
func encodeConstants(decls []msl.Constant, k *msl.Kernel, name string, cs []device.Constant) ([]constValue, error) {
	given := map[int]bool{}
	var out []constValue
	for _, c := range cs {
		var decl *msl.Constant
		for j := range decls {
			if decls[j].Index == c.Index {
				decl = &decls[j]
			}
		}
		if decl == nil {
			return nil, fmt.Errorf("pipeline %s: no function constant with index %d", name, c.Index)
		}
		if given[c.Index] {
			return nil, fmt.Errorf("pipeline %s: function constant %s given twice", name, decl.Name)
		}
		given[c.Index] = true
		v, err := encodeConstant(decl, c.Value)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", name, err)
		}
		out = append(out, v)
	}
	if k != nil {
		for _, fc := range k.Constants {
			for _, decl := range decls {
				if decl.Name == fc && !decl.Optional && !given[decl.Index] {
					return nil, fmt.Errorf("pipeline %s: function constant %s (index %d, %s:%d) is not set", name, fc, decl.Index, decl.File, decl.Line)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out, nil
}

// encodeConstant is a Go value as the bytes of the constant's MSL type.
func encodeConstant(c *msl.Constant, v any) (constValue, error) {
	bad := func() (constValue, error) {
		return constValue{}, fmt.Errorf("function constant %s is %s, not %T", c.Name, c.Type, v)
	}
	intIn := func(typ, size int, lo, hi int64) (constValue, error) {
		var n int64
		switch x := v.(type) {
		case int:
			n = int64(x)
		case int8:
			n = int64(x)
		case uint8:
			n = int64(x)
		case int16:
			n = int64(x)
		case uint16:
			n = int64(x)
		case int32:
			n = int64(x)
		case uint32:
			n = int64(x)
		default:
			return bad()
		}
		if n < lo || n > hi {
			return constValue{}, fmt.Errorf("function constant %s (%s): %d is out of range", c.Name, c.Type, n)
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		return constValue{index: c.Index, typ: typ, bytes: b[:size]}, nil
	}
	switch c.Type {
	case "bool":
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		x := byte(0)
		if b {
			x = 1
		}
		return constValue{index: c.Index, typ: dataTypeBool, bytes: []byte{x}}, nil
	case "char", "int8_t":
		return intIn(dataTypeChar, 1, math.MinInt8, math.MaxInt8)
	case "uchar", "uint8_t":
		return intIn(dataTypeUChar, 1, 0, math.MaxUint8)
	case "short", "int16_t":
		return intIn(dataTypeShort, 2, math.MinInt16, math.MaxInt16)
	case "ushort", "uint16_t":
		return intIn(dataTypeUShort, 2, 0, math.MaxUint16)
	case "int", "int32_t":
		return intIn(dataTypeInt, 4, math.MinInt32, math.MaxInt32)
	case "uint", "uint32_t":
		return intIn(dataTypeUInt, 4, 0, math.MaxUint32)
	case "float":
		f, ok := v.(float32)
		if !ok {
			return bad()
		}
		return constValue{index: c.Index, typ: dataTypeFloat, bytes: binary.LittleEndian.AppendUint32(nil, math.Float32bits(f))}, nil
	case "half":
		f, ok := v.(float32)
		if !ok {
			return bad()
		}
		return constValue{index: c.Index, typ: dataTypeHalf, bytes: binary.LittleEndian.AppendUint16(nil, half.FromFloat32(f))}, nil
	}
	return constValue{}, fmt.Errorf("function constant %s: type %s is not supported", c.Name, c.Type)
}

// pipelineKey is the pipeline cache's key: the kernel and its constants.
func pipelineKey(name string, cs []constValue) string {
	var b strings.Builder
	b.WriteString(name)
	for _, c := range cs {
		b.WriteString("|")
		b.WriteString(strconv.Itoa(c.index))
		b.WriteString(":")
		b.WriteString(strconv.Itoa(c.typ))
		b.WriteString("=")
		for _, x := range c.bytes {
			fmt.Fprintf(&b, "%02x", x)
		}
	}
	return b.String()
}
