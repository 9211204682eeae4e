package quant

import (
	"encoding/binary"

	"nibble/engine/half"
)

// Portable dot products: one weight row (raw blocks) with activation row i.
// Each block's integer sum is exact; blocks are scaled and summed in float32
// (as ggml's scalar code does, so the SIMD kernels may differ only in the
// order of that float summation).

func dotF32(w []byte, a *acts, i int) float32 {
	x := a.f[i*a.cols : (i+1)*a.cols]
	var s float32
	for j, v := range x {
		s += f32At(w, 4*j) * v
	}
	return s
}

func dotF16(w []byte, a *acts, i int) float32 {
	x := a.f[i*a.cols : (i+1)*a.cols]
	var s float32
	for j, v := range x {
		s += f16At(w, 2*j) * v
	}
	return s
}

func dotBF16(w []byte, a *acts, i int) float32 {
	x := a.f[i*a.cols : (i+1)*a.cols]
	var s float32
	for j, v := range x {
		s += half.BF16ToFloat32(binary.LittleEndian.Uint16(w[2*j:])) * v
	}
	return s
}

// q8Row returns activation row i of a 32-block kind.
func (a *acts) q8Row(i int) (qs []int8, d, s []float32) {
	return a.qs[i*a.cols : (i+1)*a.cols], a.d[i*a.nb : (i+1)*a.nb], a.s[i*a.nb : (i+1)*a.nb]
}

// Array pointers below let the compiler drop the bounds checks.

func dotQ4_0(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8Row(i)
	ys := a.sum[i*a.nb : (i+1)*a.nb]
	var sum float32
	for b := range d {
		blk, y := (*[18]byte)(w[b*18:]), (*[32]int8)(qs[b*32:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += int32(blk[2+j]&15) * int32(y[j])
			s1 += int32(blk[2+j]>>4) * int32(y[j+16])
		}
		// Σ(u-8)·y = Σu·y - 8Σy
		sum += f16At(blk[:], 0) * d[b] * float32(s0+s1-8*ys[b])
	}
	return sum
}

func dotQ4_1(w []byte, a *acts, i int) float32 {
	qs, d, s := a.q8Row(i)
	var sum float32
	for b := range d {
		blk, y := (*[20]byte)(w[b*20:]), (*[32]int8)(qs[b*32:])
		var t0, t1 int32
		for j := 0; j < 16; j++ {
			t0 += int32(blk[4+j]&15) * int32(y[j])
			t1 += int32(blk[4+j]>>4) * int32(y[j+16])
		}
		sum += f16At(blk[:], 0)*d[b]*float32(t0+t1) + f16At(blk[:], 2)*s[b]
	}
	return sum
}

func dotQ5_0(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8Row(i)
	ys := a.sum[i*a.nb : (i+1)*a.nb]
	var sum float32
	for b := range d {
		blk, y := (*[22]byte)(w[b*22:]), (*[32]int8)(qs[b*32:])
		qh := binary.LittleEndian.Uint32(blk[2:])
		var t int32
		for j := 0; j < 16; j++ {
			lo := int32(blk[6+j]&15) | int32(qh>>j&1)<<4
			hi := int32(blk[6+j]>>4) | int32(qh>>(j+16)&1)<<4
			t += lo*int32(y[j]) + hi*int32(y[j+16])
		}
		sum += f16At(blk[:], 0) * d[b] * float32(t-16*ys[b]) // Σ(q-16)·y
	}
	return sum
}

func dotQ5_1(w []byte, a *acts, i int) float32 {
	qs, d, s := a.q8Row(i)
	var sum float32
	for b := range d {
		blk, y := (*[24]byte)(w[b*24:]), (*[32]int8)(qs[b*32:])
		qh := binary.LittleEndian.Uint32(blk[4:])
		var t int32
		for j := 0; j < 16; j++ {
			lo := int32(blk[8+j]&15) | int32(qh>>j&1)<<4
			hi := int32(blk[8+j]>>4) | int32(qh>>(j+16)&1)<<4
			t += lo*int32(y[j]) + hi*int32(y[j+16])
		}
		sum += f16At(blk[:], 0)*d[b]*float32(t) + f16At(blk[:], 2)*s[b]
	}
	return sum
}

func dotQ8_0(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8Row(i)
	var sum float32
	for b := range d {
		blk, y := (*[34]byte)(w[b*34:]), (*[32]int8)(qs[b*32:])
		var t0, t1 int32
		for j := 0; j < 32; j += 2 {
			t0 += int32(int8(blk[2+j])) * int32(y[j])
			t1 += int32(int8(blk[3+j])) * int32(y[j+1])
		}
		sum += f16At(blk[:], 0) * d[b] * float32(t0+t1)
	}
	return sum
}

// q8kRow returns activation row i of the Q8_K kind.
func (a *acts) q8kRow(i int) (qs []int8, d []float32, bsums []int16) {
	return a.qs[i*a.cols : (i+1)*a.cols], a.d[i*a.nb : (i+1)*a.nb], a.bsums[i*a.cols/16 : (i+1)*a.cols/16]
}

// The k-quant dots: block = d_y·d_w·Σ_j scale_j·Σ q·y  -  d_y·dmin_w·Σ_j min_j·bsum_j.

func dotQ2_K(w []byte, a *acts, i int) float32 {
	qs, d, bsums := a.q8kRow(i)
	var sum float32
	for b := range d {
		blk, y, bs := w[b*84:b*84+84], qs[b*256:b*256+256], bsums[b*16:b*16+16]
		sc, q := blk[0:16], blk[16:80]
		var isum, msum int32
		for j := 0; j < 16; j++ {
			msum += int32(sc[j]>>4) * int32(bs[j])
		}
		for e0 := 0; e0 < 256; e0 += 16 { // one 16-element sub-block
			shift := 2 * (e0 % 128 / 32)
			base := e0/128*32 + e0%32
			var t int32
			for l := 0; l < 16; l++ {
				t += int32(q[base+l]>>shift&3) * int32(y[e0+l])
			}
			isum += int32(sc[e0/16]&15) * t
		}
		sum += d[b]*f16At(blk, 80)*float32(isum) - d[b]*f16At(blk, 82)*float32(msum)
	}
	return sum
}

func dotQ3_K(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8kRow(i)
	var sc [16]int8
	var sum float32
	for b := range d {
		blk, y := w[b*110:b*110+110], qs[b*256:b*256+256]
		hm, q := blk[0:32], blk[32:96]
		unpackQ3KScales(&sc, blk[96:108])
		var isum int32
		for e0 := 0; e0 < 256; e0 += 16 {
			shift := 2 * (e0 % 128 / 32)
			base := e0/128*32 + e0%32
			bit := e0 / 32
			var t int32
			for l := 0; l < 16; l++ {
				v := int32(q[base+l]>>shift&3) - 4 + 4*int32(hm[e0%32+l]>>bit&1)
				t += v * int32(y[e0+l])
			}
			isum += (int32(sc[e0/16]) - 32) * t
		}
		sum += d[b] * f16At(blk, 108) * float32(isum)
	}
	return sum
}

func dotQ4_K(w []byte, a *acts, i int) float32 {
	qs, d, bsums := a.q8kRow(i)
	var sum float32
	for b := range d {
		blk, y, bs := (*[144]byte)(w[b*144:]), (*[256]int8)(qs[b*256:]), (*[16]int16)(bsums[b*16:])
		scales, q := blk[4:16], blk[16:144]
		var isum, msum int32
		for j := 0; j < 4; j++ {
			s0, m0 := scaleMinK4(2*j, scales)
			s1, m1 := scaleMinK4(2*j+1, scales)
			qj, yj := (*[32]byte)(q[32*j:]), (*[64]int8)(y[64*j:])
			var t0, t1 int32
			for l := 0; l < 32; l++ {
				t0 += int32(qj[l]&15) * int32(yj[l])
				t1 += int32(qj[l]>>4) * int32(yj[l+32])
			}
			isum += int32(s0)*t0 + int32(s1)*t1
			msum += int32(m0)*(int32(bs[4*j])+int32(bs[4*j+1])) + int32(m1)*(int32(bs[4*j+2])+int32(bs[4*j+3]))
		}
		sum += d[b]*f16At(blk[:], 0)*float32(isum) - d[b]*f16At(blk[:], 2)*float32(msum)
	}
	return sum
}

func dotQ5_K(w []byte, a *acts, i int) float32 {
	qs, d, bsums := a.q8kRow(i)
	var sum float32
	for b := range d {
		blk, y, bs := (*[176]byte)(w[b*176:]), (*[256]int8)(qs[b*256:]), (*[16]int16)(bsums[b*16:])
		scales, qh, q := blk[4:16], (*[32]byte)(blk[16:48]), blk[48:176]
		var isum, msum int32
		for j := 0; j < 4; j++ {
			s0, m0 := scaleMinK4(2*j, scales)
			s1, m1 := scaleMinK4(2*j+1, scales)
			qj, yj := (*[32]byte)(q[32*j:]), (*[64]int8)(y[64*j:])
			var t0, t1 int32
			for l := 0; l < 32; l++ {
				lo := int32(qj[l]&15) | int32(qh[l]>>(2*j)&1)<<4
				hi := int32(qj[l]>>4) | int32(qh[l]>>(2*j+1)&1)<<4
				t0 += lo * int32(yj[l])
				t1 += hi * int32(yj[l+32])
			}
			isum += int32(s0)*t0 + int32(s1)*t1
			msum += int32(m0)*(int32(bs[4*j])+int32(bs[4*j+1])) + int32(m1)*(int32(bs[4*j+2])+int32(bs[4*j+3]))
		}
		sum += d[b]*f16At(blk[:], 0)*float32(isum) - d[b]*f16At(blk[:], 2)*float32(msum)
	}
	return sum
}

func dotQ6_K(w []byte, a *acts, i int) float32 {
	qs, d, _ := a.q8kRow(i)
	var sum float32
	for b := range d {
		blk, y := (*[210]byte)(w[b*210:]), (*[256]int8)(qs[b*256:])
		var isum int32
		for h := 0; h < 2; h++ {
			ql, qh := (*[64]byte)(blk[64*h:]), (*[32]byte)(blk[128+32*h:])
			sc, yh := (*[8]byte)(blk[192+8*h:]), (*[128]int8)(y[128*h:])
			var t [8]int32 // per 16-element sub-block
			for l := 0; l < 32; l++ {
				q1 := int32(ql[l]&15|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				is := l / 16
				t[is] += q1 * int32(yh[l])
				t[is+2] += q2 * int32(yh[l+32])
				t[is+4] += q3 * int32(yh[l+64])
				t[is+6] += q4 * int32(yh[l+96])
			}
			for k, v := range t {
				isum += int32(int8(sc[k])) * v
			}
		}
		sum += d[b] * f16At(blk[:], 208) * float32(isum)
	}
	return sum
}
