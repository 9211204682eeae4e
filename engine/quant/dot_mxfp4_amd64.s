//go:build amd64

#include "textflag.h"
#include "simd_amd64.h"

// ---------------------------------------------------------------- MXFP4
// A block's 16 code bytes fill both lanes: the low lane takes the low
// nibbles (elements 0..15), the high lane the high nibbles (16..31), the
// order of the Q8_0 activations. VPSHUFB maps each code to its doubled
// E2M1 value (kvalues, int8 in [-12, 12]); the products then go as Q8_0's:
// |w| unsigned against y·sign(w). The scale is dy·2^(e−128), the E8M0 half
// taken from the table the wrapper passes (R9).

// acc += dy·2^(e−128)·Σw·y for the block at woff(SI).
#define MXFP4_BLOCK(woff, qaddr, daddr, acc) \
	VMOVDQU woff+1(SI), X2; \
	VPSRLW $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND Y15, Y2, Y2; \
	VPSHUFB Y2, Y13, Y2; \
	VPSIGNB Y2, Y2, Y3; \
	VMOVDQU qaddr, Y4; \
	VPSIGNB Y2, Y4, Y4; \
	VPMADDUBSW Y4, Y3, Y3; \
	VPMADDWD Y14, Y3, Y3; \
	VCVTDQ2PS Y3, Y3; \
	MOVBLZX woff(SI), AX; \
	VBROADCASTSS (R9)(AX*4), Y5; \
	VBROADCASTSS daddr, Y6; \
	VMULPS Y5, Y6, Y5; \
	VFMADD231PS Y3, Y5, acc

// func dotMXFP4AVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, nb int, dst *float32, e8m0 *float32)
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	MOVQ e8m0+56(FP), R9
	XORQ R13, R13
	CONSTS
	VBROADCASTI128 mxfp4Values<>(SB), Y13

mxrow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ nb+40(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	SUBQ $2, CX
	JLT  mxtail

mxloop:
	PF1
	MXFP4_BLOCK(0, (DI), (R8), Y0)
	MXFP4_BLOCK(17, 32(DI), 4(R8), Y1)
	ADDQ $34, SI
	ADDQ $64, DI
	ADDQ $8, R8
	SUBQ $2, CX
	JGE  mxloop

mxtail:
	ADDQ $2, CX
	JZ   mxdone
	MXFP4_BLOCK(0, (DI), (R8), Y0)

mxdone:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+48(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  mxrow
	VZEROUPPER
	RET

// ggml's kvalues_mxfp4: twice the E2M1 value of each code.
DATA mxfp4Values<>+0(SB)/8, $0x0C08060403020100
DATA mxfp4Values<>+8(SB)/8, $0xF4F8FAFCFDFEFF00
GLOBL mxfp4Values<>(SB), RODATA|NOPTR, $16
