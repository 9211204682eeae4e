package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

// Quantize encodes src into dst, which must be exactly RowBytes(len(src)).
// It handles F32, F16, BF16, Q8_0, Q4_0 and MXFP4, byte for byte as ggml's
// reference quantize_row_*_ref (what llama-quantize writes for these types).
func Quantize(t ggml.Type, dst []byte, src []float32) error {
	switch t {
	case ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.MXFP4:
	default:
		return fmt.Errorf("quant: quantize to %s is not implemented", t)
	}
	need, err := rowBytes(t, len(src))
	if err != nil {
		return err
	}
	if len(dst) != need {
		return fmt.Errorf("quant: quantize %d elements to %s: need %d bytes, got %d", len(src), t, need, len(dst))
	}
	switch t {
	case ggml.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case ggml.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], half.FromFloat32(v))
		}
	case ggml.BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], half.BF16FromFloat32(v))
		}
	case ggml.Q8_0:
		quantizeQ8_0Ref(dst, src)
	case ggml.Q4_0:
		quantizeQ4_0Ref(dst, src)
	case ggml.MXFP4:
		quantizeMXFP4Ref(dst, src)
	}
	return nil
}

// quantizeQ8_0Ref is quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d)
// (half away from zero), with the division done as a multiply by 1/d.
func quantizeQ8_0Ref(dst []byte, src []float32) {
	for b := 0; b < len(src)/32; b++ {
		x, blk := src[b*32:b*32+32], dst[b*34:b*34+34]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, half.FromFloat32(d))
		for j, v := range x {
			blk[2+j] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// quantizeQ4_0Ref is quantize_row_q4_0_ref: the signed value of largest
// magnitude maps to -8, d = max/-8, q = min(15, trunc(x/d + 8.5)).
func quantizeQ4_0Ref(dst []byte, src []float32) {
	for b := 0; b < len(src)/32; b++ {
		x, blk := src[b*32:b*32+32], dst[b*18:b*18+18]
		var amax, mx float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, mx = a, v
			}
		}
		d := mx / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, half.FromFloat32(d))
		for j := 0; j < 16; j++ {
			// float32(...) keeps the compiler from fusing into an FMA.
			lo := min(15, int8(float32(x[j]*id)+8.5))
			hi := min(15, int8(float32(x[j+16]*id)+8.5))
			blk[2+j] = byte(lo) | byte(hi)<<4
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
