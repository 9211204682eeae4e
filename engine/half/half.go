// Package half converts between IEEE-754 binary16 / bfloat16 and float32.
package half

import "math"

// ToFloat32 converts an IEEE binary16 bit pattern to float32 (exact).
func ToFloat32(h uint16) float32 { return f16table[h] }

// FromFloat32 rounds f to the nearest binary16 (ties to even), as the F16C
// instruction VCVTPS2PH does with rounding mode 0.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 142: // overflow: |f| >= 65520 rounds to Inf
		return sign | 0x7c00
	case exp >= 113: // normal half
		m := mant >> 13
		rest := mant & 0x1fff
		h := uint32(exp-112)<<10 | m
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, which is the right result
		}
		return sign | uint16(h)
	case exp >= 102: // subnormal half
		mant |= 0x800000
		shift := uint32(126 - exp)
		m := mant >> shift
		rest := mant & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rest > halfway || (rest == halfway && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	default:
		return sign
	}
}

// Round returns f rounded through binary16.
func Round(f float32) float32 { return ToFloat32(FromFloat32(f)) }

// BF16ToFloat32 converts a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16FromFloat32 rounds to nearest even bfloat16, as ggml does (NaN kept quiet).
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + (0x7fff + (b>>16)&1)) >> 16)
}

var f16table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = convert(uint16(i))
	}
	return &t
}()

func convert(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default: // subnormal: normalize
		e := uint32(113)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
}
