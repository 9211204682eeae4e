package quant

import (
	"math"

	"nibble/engine/ggml"
)

// MXFP4 is the OCP Microscaling (MX) format with FP4 (E2M1) elements, in
// ggml's block_mxfp4 layout: one E8M0 scale byte, then 16 bytes of codes;
// element i < 16 is the low nibble of code byte i, element i+16 its high
// nibble. An E2M1 code is sign (bit 3), two exponent bits and one mantissa
// bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}. E8M0 e is 2^(e−127).
//
// ggml keeps the codes as doubled integers (kvaluesMXFP4: ±{0, 1, 2, 3, 4,
// 6, 8, 12}) and halves the scale instead (e8m0Half), so that the dot
// product against Q8_0 activations is an integer sum per block. The value is
// the same: kvalue·2^(e−128) = e2m1·2^(e−127). Scale byte 0xFF, NaN in the
// MX spec, decodes as 2^128 as in ggml (no file has it).
const mxfp4BlockBytes = 17

// kvaluesMXFP4 is ggml's kvalues_mxfp4: twice each E2M1 code's value.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0HalfTable[e] is 2^(e−128) as float32 (ggml's GGML_E8M0_TO_FP32_HALF):
// subnormal for e < 2, with 0xFF giving 2^127.
var e8m0HalfTable = func() (t [256]float32) {
	for e := range t {
		var bits uint32
		if e < 2 {
			bits = 0x00200000 << e
		} else {
			bits = uint32(e-1) << 23
		}
		t[e] = math.Float32frombits(bits)
	}
	return t
}()

func dequantMXFP4(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := (*[mxfp4BlockBytes]byte)(src[b*mxfp4BlockBytes:]), (*[32]float32)(dst[b*32:])
		d := e8m0HalfTable[blk[0]]
		for j := 0; j < 16; j++ {
			y[j] = float32(kvaluesMXFP4[blk[1+j]&15]) * d
			y[j+16] = float32(kvaluesMXFP4[blk[1+j]>>4]) * d
		}
	}
}

// quantizeMXFP4Ref is quantize_row_mxfp4_ref: the shared exponent is
// floor(log2(amax)) − 2 (E2M1's largest exponent), biased by 127, so the
// block's largest magnitude lands in [4, 8) times the scale; each element
// takes the code whose value is nearest (the first of equals, in code order).
func quantizeMXFP4Ref(dst []byte, src []float32) {
	for b := 0; b < len(src)/32; b++ {
		x, blk := src[b*32:b*32+32], dst[b*mxfp4BlockBytes:(b+1)*mxfp4BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var e uint8
		if amax > 0 {
			// log2f of the float32, then floor, as ggml computes it; the
			// clamp covers magnitudes E8M0 cannot scale (ggml's cast would
			// wrap them).
			l := math.Floor(float64(float32(math.Log2(float64(amax))))) - 2 + 127
			e = uint8(min(max(l, 0), 254))
		}
		d := e8m0HalfTable[e]
		blk[0] = e
		for j := 0; j < 16; j++ {
			blk[1+j] = nearestMXFP4(x[j], d) | nearestMXFP4(x[j+16], d)<<4
		}
	}
}

// nearestMXFP4 is ggml's best_index_mxfp4: the code whose kvalue·d is
// nearest to x, the lowest code on ties.
func nearestMXFP4(x, d float32) byte {
	best, bestErr := byte(0), abs32(float32(float32(kvaluesMXFP4[0])*d)-x)
	for i := 1; i < 16; i++ {
		// float32(...) keeps each error a float32 product and difference.
		if err := abs32(float32(float32(kvaluesMXFP4[i])*d) - x); err < bestErr {
			best, bestErr = byte(i), err
		}
	}
	return best
}

// MXFP4 weights meet float activations by default: each block's codes
// times the activations, summed in float32, times 2^(e−128). That is what
// the GPU kernels (llama.cpp's Metal ones too) and transformers compute, and
// it holds the tiny gpt-oss reference model (engine/testdata/hf) to
// transformers' logits at cosine 0.99999991 and 24 of 24 greedy tokens,
// where rounding the activations to Q8_0 first, as llama.cpp's CPU backend
// does, gives 0.9999 and leaves its tokens after 5. SetMXFP4Q8Activations
// switches to that pairing.
func dotMXFP4F32(w []byte, a *acts, i int) float32 {
	x := a.f[i*a.cols : (i+1)*a.cols]
	var sum float32
	for b := range len(x) / 32 {
		blk, y := (*[mxfp4BlockBytes]byte)(w[b*mxfp4BlockBytes:]), (*[32]float32)(x[b*32:])
		var s float32
		for j := 0; j < 16; j++ {
			s += float32(kvaluesMXFP4[blk[1+j]&15]) * y[j]
			s += float32(kvaluesMXFP4[blk[1+j]>>4]) * y[j+16]
		}
		sum += s * e8m0HalfTable[blk[0]]
	}
	return sum
}

// The two ways of MXFP4, float activations (the default) and Q8_0 ones;
// the SIMD init replaces both with its own.
var (
	mxfp4Float = kernel{act: actF32, dot1: dotMXFP4F32}
	mxfp4Q8    = kernel{act: actQ8_0, dot1: dotMXFP4}
)

// SetMXFP4Q8Activations makes MatMul pair MXFP4 weights with Q8_0
// activations (on), as llama.cpp's CPU backend does: faster, and the same
// numbers as llama.cpp's CPU, at the cost of 8-bit activations; off (the
// default) keeps them float. Call it before any MatMul, not during one.
func SetMXFP4Q8Activations(on bool) {
	if on {
		kernelsActive[ggml.MXFP4] = mxfp4Q8
	} else {
		kernelsActive[ggml.MXFP4] = mxfp4Float
	}
}

// dotMXFP4 pairs MXFP4 weights with Q8_0 activations, as ggml's
// ggml_vec_dot_mxfp4_q8_0: an integer sum per block, scaled by
// dy·2^(e−128).
func dotMXFP4(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8Row(i)
	var sum float32
	for b := range d {
		blk, y := (*[mxfp4BlockBytes]byte)(w[b*mxfp4BlockBytes:]), (*[32]int8)(qs[b*32:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += int32(kvaluesMXFP4[blk[1+j]&15]) * int32(y[j])
			s1 += int32(kvaluesMXFP4[blk[1+j]>>4]) * int32(y[j+16])
		}
		sum += d[b] * e8m0HalfTable[blk[0]] * float32(s0+s1)
	}
	return sum
}
