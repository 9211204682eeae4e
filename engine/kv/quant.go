package kv

import (
	"math"

	"nibble/engine/half"
)

// tinyScale keeps the step of a constant group positive after rounding to
// fp16 (2^-14 is the smallest normal half), so codes never divide by zero.
const tinyScale = 1.0 / 16384

// maxHalf is the largest finite binary16; metadata is clamped to it so a
// huge activation saturates instead of storing Inf.
const maxHalf = 65504

// groupParams returns the fp16-rounded {scale, bias} of x for levels steps
// (15 for q4, 255 for q8), as docs/ARCHITECTURE.md ("KV cache format")
// fixes them.
func groupParams(x []float32, levels float32) (scale, bias float32, hs, hb uint16) {
	mn, mx := x[0], x[0]
	for _, v := range x[1:] {
		mn = min(mn, v)
		mx = max(mx, v)
	}
	mn = min(max(mn, -maxHalf), maxHalf)
	mx = min(max(mx, -maxHalf), maxHalf)
	s := max((mx-mn)/levels, tinyScale)
	hs, hb = half.FromFloat32(min(s, maxHalf)), half.FromFloat32(mn)
	return half.ToFloat32(hs), half.ToFloat32(hb), hs, hb
}

// code is clamp(rint((x - bias)/scale), 0, levels).
func code(x, scale, bias, levels float32) uint32 {
	q := float32(math.RoundToEven(float64((x - bias) / scale)))
	if !(q > 0) { // also maps NaN to 0
		return 0
	}
	return uint32(min(q, levels))
}

// QuantizeGroupQ4 quantizes x (a multiple of gs elements, gs a multiple of
// 8) into 4-bit codes, len(x)/8 words with element i at bits 4*(i%8) of
// word i/8, and one {scale, bias} half pair per group of gs in dstMeta.
func QuantizeGroupQ4(dstCodes []uint32, dstMeta []uint16, x []float32, gs int) {
	for g := 0; g*gs < len(x); g++ {
		xs := x[g*gs : (g+1)*gs]
		scale, bias, hs, hb := groupParams(xs, 15)
		dstMeta[2*g], dstMeta[2*g+1] = hs, hb
		words := dstCodes[g*gs/8 : (g+1)*gs/8]
		for w := range words {
			var word uint32
			for i, v := range xs[8*w : 8*w+8] {
				word |= code(v, scale, bias, 15) << (4 * i)
			}
			words[w] = word
		}
	}
}

// QuantizeGroupQ8 is QuantizeGroupQ4 with 255 levels and one byte per element.
func QuantizeGroupQ8(dstCodes []uint8, dstMeta []uint16, x []float32, gs int) {
	for g := 0; g*gs < len(x); g++ {
		xs := x[g*gs : (g+1)*gs]
		scale, bias, hs, hb := groupParams(xs, 255)
		dstMeta[2*g], dstMeta[2*g+1] = hs, hb
		for i, v := range xs {
			dstCodes[g*gs+i] = uint8(code(v, scale, bias, 255))
		}
	}
}

// DequantizeGroupQ4 is the inverse of QuantizeGroupQ4: dst[i] = scale*q + bias.
func DequantizeGroupQ4(dst []float32, codes []uint32, meta []uint16, gs int) {
	for i := range dst {
		g := i / gs
		q := codes[i/8] >> (4 * (i % 8)) & 15
		dst[i] = half.ToFloat32(meta[2*g])*float32(q) + half.ToFloat32(meta[2*g+1])
	}
}

// DequantizeGroupQ8 is the inverse of QuantizeGroupQ8.
func DequantizeGroupQ8(dst []float32, codes []uint8, meta []uint16, gs int) {
	for i := range dst {
		g := i / gs
		dst[i] = half.ToFloat32(meta[2*g])*float32(codes[i]) + half.ToFloat32(meta[2*g+1])
	}
}
