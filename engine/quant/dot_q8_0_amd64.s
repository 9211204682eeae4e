//go:build amd64

#include "textflag.h"
#include "simd_amd64.h"

// ---------------------------------------------------------------- Q8_0
// |w| (VPSIGNB w,w) is unsigned, y·sign(w) signed: VPMADDUBSW is exact for
// every int8 w (|-128| reads as 128 unsigned) since y is in [-127, 127].

// acc += dw·dy·Σw·y for the block at woff(SI) and activations at qaddr/daddr.
#define Q8_0_BLOCK(woff, qaddr, daddr, acc) \
	VMOVDQU woff+2(SI), Y2; \
	VPSIGNB Y2, Y2, Y3; \
	VMOVDQU qaddr, Y4; \
	VPSIGNB Y2, Y4, Y4; \
	VPMADDUBSW Y4, Y3, Y3; \
	VPMADDWD Y14, Y3, Y3; \
	VCVTDQ2PS Y3, Y3; \
	VPBROADCASTW woff(SI), X5; \
	VCVTPH2PS X5, Y5; \
	VBROADCASTSS daddr, Y6; \
	VMULPS Y6, Y5, Y5; \
	VFMADD231PS Y3, Y5, acc

// func dotQ8_0AVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, nb int, dst *float32)
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS

q80row:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ nb+40(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	SUBQ $2, CX
	JLT  q80tail

q80loop:
	PF2
	Q8_0_BLOCK(0, (DI), (R8), Y0)
	Q8_0_BLOCK(34, 32(DI), 4(R8), Y1)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $8, R8
	SUBQ $2, CX
	JGE  q80loop

q80tail:
	ADDQ $2, CX
	JZ   q80done
	Q8_0_BLOCK(0, (DI), (R8), Y0)

q80done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+48(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q80row
	VZEROUPPER
	RET

// Row k of the four: y·sign(w) against |w| in Y3, dw in Y4.
#define Q8_0_ROW(qaddr, daddr, acc) \
	VMOVDQU qaddr, Y5; \
	VPSIGNB Y2, Y5, Y5; \
	VPMADDUBSW Y5, Y3, Y5; \
	VPMADDWD Y14, Y5, Y5; \
	VCVTDQ2PS Y5, Y5; \
	VBROADCASTSS daddr, Y6; \
	VMULPS Y4, Y6, Y6; \
	VFMADD231PS Y5, Y6, acc

// func dotQ8_0x4AVX2(w *byte, xq *int8, xd *float32, nb, qStride, dStride int, out *[4]float32)
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+16(FP), R8
	MOVQ nb+24(FP), CX
	MOVQ qStride+32(FP), R10
	MOVQ dStride+40(FP), R12
	LEAQ (R10)(R10*2), R11
	LEAQ (R12)(R12*2), R13
	CONSTS
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11

q80x4loop:
	PF1
	VMOVDQU 2(SI), Y2
	VPSIGNB Y2, Y2, Y3
	VPBROADCASTW (SI), X4
	VCVTPH2PS X4, Y4
	Q8_0_ROW((DI), (R8), Y0)
	Q8_0_ROW((DI)(R10*1), (R8)(R12*1), Y1)
	Q8_0_ROW((DI)(R10*2), (R8)(R12*2), Y10)
	Q8_0_ROW((DI)(R11*1), (R8)(R13*1), Y11)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R8
	DECQ CX
	JNZ  q80x4loop

	MOVQ out+48(FP), AX
	HSUM(Y0, X0, X5)
	HSUM(Y1, X1, X5)
	HSUM(Y10, X10, X5)
	HSUM(Y11, X11, X5)
	VZEROUPPER
	MOVSS X0, (AX)
	MOVSS X1, 4(AX)
	MOVSS X10, 8(AX)
	MOVSS X11, 12(AX)
	RET
