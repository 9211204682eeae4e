//go:build amd64

#include "textflag.h"

// The Q4_0 prefill GEMM tile (gemm.go), AVX-512 + VNNI: a packed group of
// 16 weight rows against a tile of 16 activation rows. Per block, Z0-Z3
// hold the low nibbles and Z4-Z7 the high ones of the 16 rows (4 bytes per
// row per register), Z8 their scales. Per activation row, VPDPBUSD with a
// broadcast 4 activation bytes adds Σu·y into each row's lane, starting from
// the correction -8Σy, so the lane ends as Σ(u-8)·y; then
// acc += float(lane)·(dw·dy). Z16-Z31 are the 16 activation rows'
// accumulators, lane r for weight row r.

// One activation row j: quants at q(DI), correction at c(R9), scale at
// c(R8) (c = 4j, q = 32j); T and S are temporaries.
#define GEMM_ROW(q, c, acc, T, S) \
	VPBROADCASTD c(R9), T; \
	VPDPBUSD.BCST q(DI), Z0, T; \
	VPDPBUSD.BCST q+4(DI), Z1, T; \
	VPDPBUSD.BCST q+8(DI), Z2, T; \
	VPDPBUSD.BCST q+12(DI), Z3, T; \
	VPDPBUSD.BCST q+16(DI), Z4, T; \
	VPDPBUSD.BCST q+20(DI), Z5, T; \
	VPDPBUSD.BCST q+24(DI), Z6, T; \
	VPDPBUSD.BCST q+28(DI), Z7, T; \
	VCVTDQ2PS T, T; \
	VMULPS.BCST c(R8), Z8, S; \
	VFMADD231PS T, S, acc

// func gemmQ4_0x16AVX512(w *byte, nb int, aq *int8, ad *float32, ac *int32, out *[256]float32)
TEXT ·gemmQ4_0x16AVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ aq+16(FP), DI
	MOVQ ad+24(FP), R8
	MOVQ ac+32(FP), R9
	MOVL $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

gemmq40loop:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPSRLW $4, Z0, Z4
	VPSRLW $4, Z1, Z5
	VPSRLW $4, Z2, Z6
	VPSRLW $4, Z3, Z7
	VPANDD Z15, Z0, Z0
	VPANDD Z15, Z1, Z1
	VPANDD Z15, Z2, Z2
	VPANDD Z15, Z3, Z3
	VPANDD Z15, Z4, Z4
	VPANDD Z15, Z5, Z5
	VPANDD Z15, Z6, Z6
	VPANDD Z15, Z7, Z7
	VCVTPH2PS 256(SI), Z8
	GEMM_ROW(0, 0, Z16, Z9, Z10)
	GEMM_ROW(32, 4, Z17, Z11, Z12)
	GEMM_ROW(64, 8, Z18, Z13, Z14)
	GEMM_ROW(96, 12, Z19, Z9, Z10)
	GEMM_ROW(128, 16, Z20, Z11, Z12)
	GEMM_ROW(160, 20, Z21, Z13, Z14)
	GEMM_ROW(192, 24, Z22, Z9, Z10)
	GEMM_ROW(224, 28, Z23, Z11, Z12)
	GEMM_ROW(256, 32, Z24, Z13, Z14)
	GEMM_ROW(288, 36, Z25, Z9, Z10)
	GEMM_ROW(320, 40, Z26, Z11, Z12)
	GEMM_ROW(352, 44, Z27, Z13, Z14)
	GEMM_ROW(384, 48, Z28, Z9, Z10)
	GEMM_ROW(416, 52, Z29, Z11, Z12)
	GEMM_ROW(448, 56, Z30, Z13, Z14)
	GEMM_ROW(480, 60, Z31, Z9, Z10)
	ADDQ $288, SI
	ADDQ $512, DI
	ADDQ $64, R8
	ADDQ $64, R9
	DECQ CX
	JNZ  gemmq40loop

	MOVQ out+40(FP), AX
	VMOVUPS Z16, (AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VMOVUPS Z20, 256(AX)
	VMOVUPS Z21, 320(AX)
	VMOVUPS Z22, 384(AX)
	VMOVUPS Z23, 448(AX)
	VMOVUPS Z24, 512(AX)
	VMOVUPS Z25, 576(AX)
	VMOVUPS Z26, 640(AX)
	VMOVUPS Z27, 704(AX)
	VMOVUPS Z28, 768(AX)
	VMOVUPS Z29, 832(AX)
	VMOVUPS Z30, 896(AX)
	VMOVUPS Z31, 960(AX)
	VZEROUPPER
	RET

// func packQ4_0GroupAVX(dst, w *byte, rb, nb int)
// packQ4_0Group in assembly: per block, four rows at a time, their 16 nibble
// bytes as 4 dwords are transposed so that dword k of the 4 rows lands in
// vector k; then the 16 fp16 scales.
TEXT ·packQ4_0GroupAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), BX
	MOVQ nb+24(FP), CX
	LEAQ (BX)(BX*2), R8 // 3 rows
	MOVQ BX, R9
	SHLQ $2, R9 // 4 rows

packq40block:
	MOVQ SI, DX
	XORQ R10, R10

packq40quad:
	VMOVDQU 2(DX), X0
	VMOVDQU 2(DX)(BX*1), X1
	VMOVDQU 2(DX)(BX*2), X2
	VMOVDQU 2(DX)(R8*1), X3
	VPUNPCKLDQ X1, X0, X4 // a0 b0 a1 b1
	VPUNPCKHDQ X1, X0, X5 // a2 b2 a3 b3
	VPUNPCKLDQ X3, X2, X6 // c0 d0 c1 d1
	VPUNPCKHDQ X3, X2, X7 // c2 d2 c3 d3
	VPUNPCKLQDQ X6, X4, X0
	VPUNPCKHQDQ X6, X4, X1
	VPUNPCKLQDQ X7, X5, X2
	VPUNPCKHQDQ X7, X5, X3
	VMOVDQU X0, (DI)(R10*4)
	VMOVDQU X1, 64(DI)(R10*4)
	VMOVDQU X2, 128(DI)(R10*4)
	VMOVDQU X3, 192(DI)(R10*4)
	MOVW (DX), AX
	MOVW AX, 256(DI)(R10*2)
	MOVW (DX)(BX*1), AX
	MOVW AX, 258(DI)(R10*2)
	MOVW (DX)(BX*2), AX
	MOVW AX, 260(DI)(R10*2)
	MOVW (DX)(R8*1), AX
	MOVW AX, 262(DI)(R10*2)
	ADDQ R9, DX
	ADDQ $4, R10
	CMPQ R10, $16
	JLT  packq40quad

	ADDQ $18, SI
	ADDQ $288, DI
	DECQ CX
	JNZ  packq40block
	RET
