package quant

import (
	"encoding/binary"
	"math"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

// Scalar references written from ggml's dequantize_row_* loop structure,
// independent of the package's element-indexed versions.

func refF16(b []byte) float64 { return float64(half.ToFloat32(binary.LittleEndian.Uint16(b))) }

func refDequant(t ggml.Type, src []byte, n int) []float64 {
	y := make([]float64, 0, n)
	ts := t.TypeSize()
	switch t {
	case ggml.F32:
		for i := 0; i < n; i++ {
			y = append(y, float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))))
		}
		return y
	case ggml.F16:
		for i := 0; i < n; i++ {
			y = append(y, refF16(src[2*i:]))
		}
		return y
	case ggml.BF16:
		for i := 0; i < n; i++ {
			y = append(y, float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:]))<<16)))
		}
		return y
	}
	for off := 0; off < len(src); off += ts {
		x := src[off : off+ts]
		switch t {
		case ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0:
			y = append(y, refBlock32(t, x)...)
		case ggml.Q2_K:
			y = append(y, refQ2K(x)...)
		case ggml.Q3_K:
			y = append(y, refQ3K(x)...)
		case ggml.Q4_K, ggml.Q5_K:
			y = append(y, refQ45K(t, x)...)
		case ggml.Q6_K:
			y = append(y, refQ6K(x)...)
		case ggml.MXFP4:
			y = append(y, refMXFP4(x)...)
		}
	}
	return y
}

func refBlock32(t ggml.Type, x []byte) []float64 {
	y := make([]float64, 32)
	d := refF16(x)
	switch t {
	case ggml.Q8_0:
		for j := 0; j < 32; j++ {
			y[j] = float64(int8(x[2+j])) * d
		}
	case ggml.Q4_0:
		for j := 0; j < 16; j++ {
			y[j] = float64(int(x[2+j]&0x0F)-8) * d
			y[j+16] = float64(int(x[2+j]>>4)-8) * d
		}
	case ggml.Q4_1:
		m := refF16(x[2:])
		for j := 0; j < 16; j++ {
			y[j] = float64(x[4+j]&0x0F)*d + m
			y[j+16] = float64(x[4+j]>>4)*d + m
		}
	case ggml.Q5_0, ggml.Q5_1:
		m, o := 0.0, 2
		if t == ggml.Q5_1 {
			m, o = refF16(x[2:]), 4
		}
		qh := uint32(x[o]) | uint32(x[o+1])<<8 | uint32(x[o+2])<<16 | uint32(x[o+3])<<24
		qs := x[o+4:]
		for j := 0; j < 16; j++ {
			xh0 := ((qh >> j) << 4) & 0x10
			xh1 := (qh >> (j + 12)) & 0x10
			x0 := int(uint32(qs[j]&0x0F) | xh0)
			x1 := int(uint32(qs[j]>>4) | xh1)
			if t == ggml.Q5_0 {
				x0, x1 = x0-16, x1-16
			}
			y[j] = float64(x0)*d + m
			y[j+16] = float64(x1)*d + m
		}
	}
	return y
}

func refQ2K(x []byte) []float64 {
	scales, q := x[0:16], x[16:80]
	d, mn := refF16(x[80:]), refF16(x[82:])
	var y []float64
	is := 0
	for n := 0; n < 256; n += 128 {
		shift := 0
		for j := 0; j < 4; j++ {
			for half := 0; half < 2; half++ {
				sc := scales[is]
				is++
				dl, ml := d*float64(sc&0xF), mn*float64(sc>>4)
				for l := 0; l < 16; l++ {
					y = append(y, dl*float64((q[l+16*half]>>shift)&3)-ml)
				}
			}
			shift += 2
		}
		q = q[32:]
	}
	return y
}

func refQ3K(x []byte) []float64 {
	hm, q := x[0:32], x[32:96]
	d := refF16(x[108:])
	// kmask arithmetic on 32-bit words, as ggml does.
	var aux [4]uint32
	for i := 0; i < 3; i++ {
		aux[i] = binary.LittleEndian.Uint32(x[96+4*i:])
	}
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	tmp := aux[2]
	aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
	aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
	aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
	aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
	var sc [16]int8
	for i := 0; i < 16; i++ {
		sc[i] = int8(aux[i/4] >> (8 * (i % 4)))
	}
	var y []float64
	is, m := 0, byte(1)
	for n := 0; n < 256; n += 128 {
		shift := 0
		for j := 0; j < 4; j++ {
			for half := 0; half < 2; half++ {
				dl := d * float64(int(sc[is])-32)
				is++
				for l := 16 * half; l < 16*half+16; l++ {
					v := int((q[l] >> shift) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					y = append(y, dl*float64(v))
				}
			}
			shift += 2
			m <<= 1
		}
		q = q[32:]
	}
	return y
}

func refScaleMinK4(j int, q []byte) (int, int) {
	if j < 4 {
		return int(q[j] & 63), int(q[j+4] & 63)
	}
	return int((q[j+4] & 0xF) | ((q[j-4] >> 6) << 4)), int((q[j+4] >> 4) | ((q[j] >> 6) << 4))
}

func refQ45K(t ggml.Type, x []byte) []float64 {
	d, mn := refF16(x), refF16(x[2:])
	scales := x[4:16]
	var qh, ql []byte
	if t == ggml.Q5_K {
		qh, ql = x[16:48], x[48:176]
	} else {
		ql = x[16:144]
	}
	var y []float64
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < 256; j += 64 {
		sc, m := refScaleMinK4(is, scales)
		d1, m1 := d*float64(sc), mn*float64(m)
		sc, m = refScaleMinK4(is+1, scales)
		d2, m2 := d*float64(sc), mn*float64(m)
		for l := 0; l < 32; l++ {
			v := int(ql[l] & 0xF)
			if qh != nil && qh[l]&u1 != 0 {
				v += 16
			}
			y = append(y, d1*float64(v)-m1)
		}
		for l := 0; l < 32; l++ {
			v := int(ql[l] >> 4)
			if qh != nil && qh[l]&u2 != 0 {
				v += 16
			}
			y = append(y, d2*float64(v)-m2)
		}
		ql = ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
	return y
}

func refQ6K(x []byte) []float64 {
	ql, qh, sc := x[0:128], x[128:192], x[192:208]
	d := refF16(x[208:])
	y := make([]float64, 256)
	for n := 0; n < 256; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(int8((ql[l]&0xF)|((qh[l]>>0)&3)<<4)) - 32
			q2 := int(int8((ql[l+32]&0xF)|((qh[l]>>2)&3)<<4)) - 32
			q3 := int(int8((ql[l]>>4)|((qh[l]>>4)&3)<<4)) - 32
			q4 := int(int8((ql[l+32]>>4)|((qh[l]>>6)&3)<<4)) - 32
			y[n+l] = d * float64(int8(sc[is])) * float64(q1)
			y[n+l+32] = d * float64(int8(sc[is+2])) * float64(q2)
			y[n+l+64] = d * float64(int8(sc[is+4])) * float64(q3)
			y[n+l+96] = d * float64(int8(sc[is+6])) * float64(q4)
		}
		ql, qh, sc = ql[64:], qh[32:], sc[8:]
	}
	return y
}
