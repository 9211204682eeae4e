package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

// Dequantize expands len(dst) elements (a multiple of t's block size) from
// src, which must hold exactly those elements.
func Dequantize(t ggml.Type, dst []float32, src []byte) error {
	need, err := rowBytes(t, len(dst))
	if err != nil {
		return err
	}
	if len(src) != need {
		return fmt.Errorf("quant: dequantize %d %s elements: need %d bytes, got %d", len(dst), t, need, len(src))
	}
	dequantizers[t](dst, src)
	return nil
}

// DequantizeRow expands row r of w into dst (len(dst) == w.Cols); the
// embedding lookup uses it.
func DequantizeRow(w Matrix, r int, dst []float32) error {
	rb, err := w.check()
	if err != nil {
		return err
	}
	if r < 0 || r >= w.Rows {
		return fmt.Errorf("quant: row %d outside %d rows", r, w.Rows)
	}
	if len(dst) != w.Cols {
		return fmt.Errorf("quant: row of %d elements into a buffer of %d", w.Cols, len(dst))
	}
	dequantizers[w.Type](dst, w.Data[r*rb:(r+1)*rb])
	return nil
}

// dequantizers expand whole blocks; the callers validated the sizes.
var dequantizers = map[ggml.Type]func(dst []float32, src []byte){
	ggml.F32:  dequantF32,
	ggml.F16:  dequantF16,
	ggml.BF16: dequantBF16,
	ggml.Q4_0: dequantQ4_0,
	ggml.Q4_1: dequantQ4_1,
	ggml.Q5_0: dequantQ5_0,
	ggml.Q5_1: dequantQ5_1,
	ggml.Q8_0: dequantQ8_0,
	ggml.Q2_K: dequantQ2_K,
	ggml.Q3_K: dequantQ3_K,
	ggml.Q4_K: dequantQ4_K,
	ggml.Q5_K: dequantQ5_K,
	ggml.Q6_K: dequantQ6_K,

	ggml.MXFP4: dequantMXFP4,
}

func f16At(b []byte, off int) float32 { return half.ToFloat32(binary.LittleEndian.Uint16(b[off:])) }

func dequantF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = f16At(src, 2*i)
	}
}

func dequantBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = bf16At(src, 2*i)
	}
}

// Q4_0: fp16 d, 16 bytes; low nibbles are elements 0..15, high 16..31.
func dequantQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[b*18:b*18+18], dst[b*32:b*32+32]
		d := f16At(blk, 0)
		for j := 0; j < 16; j++ {
			y[j] = float32(int(blk[2+j]&15)-8) * d
			y[j+16] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
}

// Q4_1: fp16 d, fp16 m, 16 bytes of nibbles; x = q·d + m.
func dequantQ4_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[b*20:b*20+20], dst[b*32:b*32+32]
		d, m := f16At(blk, 0), f16At(blk, 2)
		for j := 0; j < 16; j++ {
			y[j] = float32(blk[4+j]&15)*d + m
			y[j+16] = float32(blk[4+j]>>4)*d + m
		}
	}
}

// Q5_0: fp16 d, 32 high bits (bit j belongs to element j), 16 bytes of
// nibbles; x = (q - 16)·d.
func dequantQ5_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[b*22:b*22+22], dst[b*32:b*32+32]
		d := f16At(blk, 0)
		qh := binary.LittleEndian.Uint32(blk[2:])
		for j := 0; j < 16; j++ {
			lo := int(blk[6+j]&15) | int(qh>>j&1)<<4
			hi := int(blk[6+j]>>4) | int(qh>>(j+16)&1)<<4
			y[j] = float32(lo-16) * d
			y[j+16] = float32(hi-16) * d
		}
	}
}

// Q5_1: fp16 d, fp16 m, 32 high bits, 16 bytes of nibbles; x = q·d + m.
func dequantQ5_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[b*24:b*24+24], dst[b*32:b*32+32]
		d, m := f16At(blk, 0), f16At(blk, 2)
		qh := binary.LittleEndian.Uint32(blk[4:])
		for j := 0; j < 16; j++ {
			lo := blk[8+j]&15 | byte(qh>>j&1)<<4
			hi := blk[8+j]>>4 | byte(qh>>(j+16)&1)<<4
			y[j] = float32(lo)*d + m
			y[j+16] = float32(hi)*d + m
		}
	}
}

// Q8_0: fp16 d, 32 int8.
func dequantQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk, y := src[b*34:b*34+34], dst[b*32:b*32+32]
		d := f16At(blk, 0)
		for j := range y {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

// Q2_K: 16 bytes of 4-bit scale|min<<4, 64 bytes of 2-bit quants, fp16 d,
// fp16 dmin. Element e sits in byte (e/128)*32 + e%32 at bit 2·((e%128)/32);
// its scale byte is e/16.
func dequantQ2_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk, y := src[b*84:b*84+84], dst[b*256:b*256+256]
		sc, qs := blk[0:16], blk[16:80]
		d, dmin := f16At(blk, 80), f16At(blk, 82)
		for e := range y {
			q := qs[e/128*32+e%32] >> (2 * (e % 128 / 32)) & 3
			s := sc[e/16]
			y[e] = d*float32(s&15)*float32(q) - dmin*float32(s>>4)
		}
	}
}

// Q3_K: 32 bytes of high-bit masks, 64 bytes of 2-bit quants, 12 bytes of
// packed 6-bit scales, fp16 d. A clear high bit means q - 4.
func dequantQ3_K(dst []float32, src []byte) {
	var sc [16]int8
	for b := 0; b < len(dst)/256; b++ {
		blk, y := src[b*110:b*110+110], dst[b*256:b*256+256]
		hm, qs := blk[0:32], blk[32:96]
		unpackQ3KScales(&sc, blk[96:108])
		d := f16At(blk, 108)
		for e := range y {
			shift := 2 * (e % 128 / 32)
			q := int(qs[e/128*32+e%32]>>shift&3) - 4
			if hm[e%32]>>(e/32)&1 != 0 {
				q += 4
			}
			y[e] = d * float32(int(sc[e/16])-32) * float32(q)
		}
	}
}

// unpackQ3KScales spreads 12 bytes into 16 6-bit scales (still offset by
// 32): low 4 bits from bytes 0..7 (low then high nibbles), high 2 bits from
// bytes 8..11.
func unpackQ3KScales(sc *[16]int8, p []byte) {
	for j := 0; j < 16; j++ {
		lo := p[j%8] >> (4 * (j / 8)) & 15
		hi := p[8+j%4] >> (2 * (j / 4)) & 3
		sc[j] = int8(lo | hi<<4)
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: 8 6-bit scales and 8 6-bit mins
// packed in 12 bytes (Q4_K, Q5_K).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K: fp16 d, fp16 dmin, 12 scale bytes, 128 bytes: 32 bytes per 64
// elements, low nibbles first.
func dequantQ4_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk, y := src[b*144:b*144+144], dst[b*256:b*256+256]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		scales, qs := blk[4:16], blk[16:144]
		for j := 0; j < 4; j++ {
			s0, m0 := scaleMinK4(2*j, scales)
			s1, m1 := scaleMinK4(2*j+1, scales)
			d0, n0 := d*float32(s0), dmin*float32(m0)
			d1, n1 := d*float32(s1), dmin*float32(m1)
			q, out := qs[32*j:32*j+32], y[64*j:64*j+64]
			for l := 0; l < 32; l++ {
				out[l] = d0*float32(q[l]&15) - n0
				out[l+32] = d1*float32(q[l]>>4) - n1
			}
		}
	}
}

// Q5_K: Q4_K plus 32 bytes of high bits (bit 2j for the low-nibble half of
// chunk j, bit 2j+1 for the high-nibble half).
func dequantQ5_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk, y := src[b*176:b*176+176], dst[b*256:b*256+256]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:176]
		for j := 0; j < 4; j++ {
			s0, m0 := scaleMinK4(2*j, scales)
			s1, m1 := scaleMinK4(2*j+1, scales)
			d0, n0 := d*float32(s0), dmin*float32(m0)
			d1, n1 := d*float32(s1), dmin*float32(m1)
			q, out := qs[32*j:32*j+32], y[64*j:64*j+64]
			for l := 0; l < 32; l++ {
				lo := q[l]&15 | (qh[l]>>(2*j)&1)<<4
				hi := q[l]>>4 | (qh[l]>>(2*j+1)&1)<<4
				out[l] = d0*float32(lo) - n0
				out[l+32] = d1*float32(hi) - n1
			}
		}
	}
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales,
// fp16 d; q - 32.
func dequantQ6_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk, y := src[b*210:b*210+210], dst[b*256:b*256+256]
		d := f16At(blk, 208)
		for h := 0; h < 2; h++ {
			ql, qh := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32]
			sc, out := blk[192+8*h:192+8*h+8], y[128*h:128*h+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&15|(qh[l]&3)<<4) - 32
				q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = d * float32(int8(sc[is])) * float32(q1)
				out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

func bf16At(b []byte, off int) float32 {
	return half.BF16ToFloat32(binary.LittleEndian.Uint16(b[off:]))
}

func f32At(b []byte, off int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
}
