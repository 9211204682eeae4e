package device

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/half"
	"nibble/metal/msl"
)

// EncodedConstant is a function constant's value as the bytes of its MSL
// type.
type EncodedConstant struct {
	Decl  *msl.Constant // the declaration it sets (an element of decls)
	Bytes []byte        // little-endian, the type's size
}

// EncodeConstants checks the function constant values cs of pipeline name
// against the constants the sources declare (decls: msl.Parse's list)
// and encodes them, in the order given, by the rules both devices share:
// each index is declared and given once, each value's Go type fits its
// constant's MSL type (see Constant), an integer is in the type's range, and
// every constant kernel k names must be given unless the sources test
// is_function_constant_defined (k nil: none is required).
func EncodeConstants(decls []msl.Constant, k *msl.Kernel, name string, cs []Constant) ([]EncodedConstant, error) {
	given := map[int]bool{}
	var out []EncodedConstant
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
		b, err := EncodeConstant(decl, c.Value)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", name, err)
		}
		out = append(out, EncodedConstant{Decl: decl, Bytes: b})
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
	return out, nil
}

// EncodeConstant is a Go value as the bytes of the constant's MSL type
// (little-endian, the type's size); the value's Go type must fit the MSL
// type (see Constant) and an integer must be in its range.
func EncodeConstant(c *msl.Constant, v any) ([]byte, error) {
	bad := func() ([]byte, error) {
		return nil, fmt.Errorf("function constant %s is %s, not %T", c.Name, c.Type, v)
	}
	intIn := func(size int, lo, hi int64) ([]byte, error) {
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
			return nil, fmt.Errorf("function constant %s (%s): %d is out of range", c.Name, c.Type, n)
		}
		// The low bytes of the two's complement, little-endian.
		return binary.LittleEndian.AppendUint64(nil, uint64(n))[:size], nil
	}
	switch c.Type {
	case "bool":
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case "char", "int8_t":
		return intIn(1, math.MinInt8, math.MaxInt8)
	case "uchar", "uint8_t":
		return intIn(1, 0, math.MaxUint8)
	case "short", "int16_t":
		return intIn(2, math.MinInt16, math.MaxInt16)
	case "ushort", "uint16_t":
		return intIn(2, 0, math.MaxUint16)
	case "int", "int32_t":
		return intIn(4, math.MinInt32, math.MaxInt32)
	case "uint", "uint32_t":
		return intIn(4, 0, math.MaxUint32)
	case "float":
		f, ok := v.(float32)
		if !ok {
			return bad()
		}
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(f)), nil
	case "half":
		f, ok := v.(float32)
		if !ok {
			return bad()
		}
		return binary.LittleEndian.AppendUint16(nil, half.FromFloat32(f)), nil
	}
	return nil, fmt.Errorf("function constant %s: type %s is not supported", c.Name, c.Type)
}
