//go:build amd64

package quant

// Assembly activation quantizers (quantize_amd64.s), installed by init in
// simd_amd64.go.

//go:noescape
func quantizeQ8_0AVX2(x *float32, qs *int8, d, s *float32, sum *int32, nb int)

//go:noescape
func quantizeQ8KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)

//go:noescape
func roundF16AVX2(dst, src *float32, n int)

func quantizeQ8Simd(qs []int8, d, s []float32, sum []int32, x []float32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	_, _, _, _ = qs[nb*32-1], s[nb-1], sum[nb-1], x[nb*32-1]
	quantizeQ8_0AVX2(&x[0], &qs[0], &d[0], &s[0], &sum[0], nb)
}

func quantizeQ8KSimd(qs []int8, d []float32, bsums []int16, x []float32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	_, _, _ = qs[nb*256-1], bsums[nb*16-1], x[nb*256-1]
	quantizeQ8KAVX2(&x[0], &qs[0], &d[0], &bsums[0], nb)
}

func roundF16Simd(dst, src []float32) {
	n8 := len(src) &^ 7
	if n8 > 0 {
		_ = dst[n8-1]
		roundF16AVX2(&dst[0], &src[0], n8)
	}
	roundF16Go(dst[n8:len(src)], src[n8:])
}
