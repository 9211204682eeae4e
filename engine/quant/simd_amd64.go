//go:build amd64

package quant

import (
	"golang.org/x/sys/cpu"

	"nibble/engine/ggml"
)

// simdName names the SIMD kernels in use ("" = portable only).
var simdName string

func cpuid1ecx() uint32

// Assembly kernels (dot_*_amd64.s). The single-row-of-activations kernels
// take consecutive weight rows (rowBytes apart) and write dst[r] for each;
// pointers are to first elements of slices the wrappers checked.

//go:noescape
func dotQ4_0AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, nb int, dst *float32)

//go:noescape
func dotQ4_0x4AVX2(w *byte, px *int8, pd *float32, pc *int32, nb, pxStride, pdStride int, out *[4]float32)

//go:noescape
func dotQ5_0AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)

//go:noescape
func dotQ4_1AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)

//go:noescape
func dotQ5_1AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)

//go:noescape
func dotQ8_0AVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, nb int, dst *float32)

//go:noescape
func dotQ8_0x4AVX2(w *byte, xq *int8, xd *float32, nb, qStride, dStride int, out *[4]float32)

//go:noescape
func dotMXFP4AVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, nb int, dst *float32, e8m0 *float32)

//go:noescape
func dotMXFP4F32AVX2(w *byte, rowBytes, rows int, x *float32, nb int, dst *float32, e8m0 *float32)

//go:noescape
func dotMXFP4F32x4AVX2(w *byte, x *float32, nb, xStride int, out *[4]float32, e8m0 *float32)

//go:noescape
func dotF16AVX2(w *byte, rowBytes, rows int, x *float32, n int, dst *float32)

//go:noescape
func dotF16x4AVX2(w *byte, x *float32, n, xStride int, out *[4]float32)

//go:noescape
func dotBF16AVX2(w *byte, rowBytes, rows int, x *float32, n int, dst *float32)

//go:noescape
func dotF32AVX2(w *byte, rowBytes, rows int, x *float32, n int, dst *float32)

//go:noescape
func dotQ2_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)

//go:noescape
func dotQ3_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)

//go:noescape
func dotQ4_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)

//go:noescape
func dotQ5_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)

//go:noescape
func dotQ6_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)

func init() {
	const f16c = 1 << 29 // CPUID.1:ECX
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || cpuid1ecx()&f16c == 0 {
		return
	}
	simdName = "avx2"
	quantizeQ8Row, quantizeQ8KRow, roundF16 = quantizeQ8Simd, quantizeQ8KSimd, roundF16Simd
	t := &kernelsActive
	t[ggml.Q4_0] = simdKernel(actQ8_0, rowsQ4_0, dotQ4_0x4Simd)
	t[ggml.Q4_0].pairs, t[ggml.Q4_0].pairCorr = true, 2 // 8Σy over 4 lanes
	switch {
	case enableAMX():
		simdName = "avx2+amx"
		t[ggml.Q4_0].gemm, t[ggml.Q4_0].tileCorr = &gemmQ4_0AMX, 8
	case hasGemmAVX512():
		simdName = "avx2+avx512vnni"
		t[ggml.Q4_0].gemm, t[ggml.Q4_0].tileCorr = &gemmQ4_0AVX512, 8
	}
	t[ggml.Q5_0] = simdKernel(actQ8_0, rowsPairs(dotQ5_0AVX2), nil)
	t[ggml.Q5_0].pairs, t[ggml.Q5_0].pairCorr = true, 4 // 16Σy over 4 lanes
	t[ggml.Q4_1] = simdKernel(actQ8_1, rowsPairs(dotQ4_1AVX2), nil)
	t[ggml.Q4_1].pairs = true
	t[ggml.Q5_1] = simdKernel(actQ8_1, rowsPairs(dotQ5_1AVX2), nil)
	t[ggml.Q5_1].pairs = true
	t[ggml.Q8_0] = simdKernel(actQ8_0, rowsQ8_0, dotQ8_0x4Simd)
	mxfp4Float, mxfp4Q8 = simdKernel(actF32, rowsMXFP4F32, dotMXFP4F32x4Simd), simdKernel(actQ8_0, rowsMXFP4, nil)
	t[ggml.MXFP4] = mxfp4Float
	t[ggml.F16] = simdKernel(actF16, floatRows(dotF16AVX2, f16At, 2), dotF16x4Simd)
	t[ggml.BF16] = simdKernel(actBF16, floatRows(dotBF16AVX2, bf16At, 2), nil)
	t[ggml.F32] = simdKernel(actF32, floatRows(dotF32AVX2, f32At, 4), nil)
	t[ggml.Q2_K] = simdKernel(actQ8_K, rowsKQuant(dotQ2_KAVX2), nil)
	t[ggml.Q3_K] = simdKernel(actQ8_K, rowsKQuant(dotQ3_KAVX2), nil)
	t[ggml.Q4_K] = simdKernel(actQ8_K, rowsKQuant(dotQ4_KAVX2), nil)
	t[ggml.Q5_K] = simdKernel(actQ8_K, rowsKQuant(dotQ5_KAVX2), nil)
	t[ggml.Q6_K] = simdKernel(actQ8_K, rowsKQuant(dotQ6_KAVX2), nil)
}

type rowsFunc = func(w []byte, rb int, a *acts, i int, dst []float32)

type dot4Func = func(w []byte, a *acts, i int, out []float32, stride int)

func simdKernel(act actKind, rows rowsFunc, dot4 dot4Func) kernel {
	dot1 := func(w []byte, a *acts, i int) float32 {
		var out [1]float32
		rows(w, len(w), a, i, out[:])
		return out[0]
	}
	return kernel{act: act, dot1: dot1, rows: rows, dot4: dot4}
}

func rowsQ4_0(w []byte, rb int, a *acts, i int, dst []float32) {
	np := a.np
	_ = w[len(dst)*rb-1]
	dotQ4_0AVX2(&w[0], rb, len(dst), &a.px[i*np*64], &a.pd[i*np*8], &a.pc[i*np*8], a.nb, &dst[0])
}

// rowsPairs wraps a pair-layout kernel with the m·s term (Q4_1, Q5_0, Q5_1).
func rowsPairs(asm func(*byte, int, int, *int8, *float32, *int32, *float32, int, *float32)) rowsFunc {
	return func(w []byte, rb int, a *acts, i int, dst []float32) {
		np := a.np
		_ = w[len(dst)*rb-1]
		asm(&w[0], rb, len(dst), &a.px[i*np*64], &a.pd[i*np*8], &a.pc[i*np*8], &a.ps[i*np*8], a.nb, &dst[0])
	}
}

func dotQ4_0x4Simd(w []byte, a *acts, i int, out []float32, stride int) {
	np := a.np
	_ = a.pc[(i+4)*np*8-1] // the four rows are in bounds
	var o [4]float32
	dotQ4_0x4AVX2(&w[0], &a.px[i*np*64], &a.pd[i*np*8], &a.pc[i*np*8], a.nb, np*64, np*8*4, &o)
	scatter4(out, stride, &o)
}

// scatter4 writes the four results of a dot4 kernel stride apart.
func scatter4(out []float32, stride int, o *[4]float32) {
	_ = out[3*stride]
	out[0], out[stride], out[2*stride], out[3*stride] = o[0], o[1], o[2], o[3]
}

func rowsQ8_0(w []byte, rb int, a *acts, i int, dst []float32) {
	_ = w[len(dst)*rb-1]
	dotQ8_0AVX2(&w[0], rb, len(dst), &a.qs[i*a.cols], &a.d[i*a.nb], a.nb, &dst[0])
}

func rowsMXFP4(w []byte, rb int, a *acts, i int, dst []float32) {
	_ = w[len(dst)*rb-1]
	dotMXFP4AVX2(&w[0], rb, len(dst), &a.qs[i*a.cols], &a.d[i*a.nb], a.nb, &dst[0], &e8m0HalfTable[0])
}

func rowsMXFP4F32(w []byte, rb int, a *acts, i int, dst []float32) {
	_ = w[len(dst)*rb-1]
	x := a.f[i*a.cols : (i+1)*a.cols]
	dotMXFP4F32AVX2(&w[0], rb, len(dst), &x[0], len(x)/32, &dst[0], &e8m0HalfTable[0])
}

func dotMXFP4F32x4Simd(w []byte, a *acts, i int, out []float32, stride int) {
	c := a.cols
	_ = a.f[(i+4)*c-1] // the four rows are in bounds
	_ = w[c/32*mxfp4BlockBytes-1]
	var o [4]float32
	dotMXFP4F32x4AVX2(&w[0], &a.f[i*c], c/32, c, &o, &e8m0HalfTable[0])
	scatter4(out, stride, &o)
}

func dotQ8_0x4Simd(w []byte, a *acts, i int, out []float32, stride int) {
	_ = a.d[(i+4)*a.nb-1]
	var o [4]float32
	dotQ8_0x4AVX2(&w[0], &a.qs[i*a.cols], &a.d[i*a.nb], a.nb, a.cols, a.nb*4, &o)
	scatter4(out, stride, &o)
}

// rowsKQuant wraps a k-quant kernel (activations in Q8_K).
func rowsKQuant(asm func(*byte, int, int, *int8, *float32, *int16, int, *float32)) rowsFunc {
	return func(w []byte, rb int, a *acts, i int, dst []float32) {
		_ = w[len(dst)*rb-1]
		asm(&w[0], rb, len(dst), &a.qs[i*a.cols], &a.d[i*a.nb], &a.bsums[i*a.cols/16], a.nb, &dst[0])
	}
}

// floatRows wraps a float kernel, which handles multiples of 8 elements;
// rows of other lengths go element by element.
func floatRows(asm func(*byte, int, int, *float32, int, *float32), at func([]byte, int) float32, size int) rowsFunc {
	return func(w []byte, rb int, a *acts, i int, dst []float32) {
		x := a.f[i*a.cols : (i+1)*a.cols]
		if len(x)%8 == 0 {
			_ = w[len(dst)*rb-1]
			asm(&w[0], rb, len(dst), &x[0], len(x), &dst[0])
			return
		}
		for r := range dst {
			var s float32
			for j, v := range x {
				s += at(w[r*rb:], size*j) * v
			}
			dst[r] = s
		}
	}
}

func dotF16x4Simd(w []byte, a *acts, i int, out []float32, stride int) {
	c := a.cols
	var o [4]float32
	if c%8 != 0 {
		for k := range o {
			o[k] = kernelsActive[ggml.F16].dot1(w, a, i+k)
		}
	} else {
		_ = a.f[(i+4)*c-1]
		dotF16x4AVX2(&w[0], &a.f[i*c], c, c*4, &o)
	}
	scatter4(out, stride, &o)
}
