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

// Float activations: the codes of a block become 32 int8 kvalues (two
// VPSHUFB), widened to int32 and floats 8 at a time, multiplied by the
// block's 32 activations; the block's sum is scaled by 2^(e−128) into the
// accumulator.

// func dotMXFP4F32AVX2(w *byte, rowBytes, rows int, x *float32, nb int, dst *float32, e8m0 *float32)
TEXT ·dotMXFP4F32AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R12
	MOVQ e8m0+48(FP), R9
	XORQ R13, R13
	CONSTS
	VMOVDQU mxfp4Values<>(SB), X13

mfrow:
	MOVQ R12, SI
	MOVQ x+24(FP), DI
	MOVQ nb+32(FP), CX
	VPXOR Y0, Y0, Y0

mfloop:
	PF1
	VMOVDQU 1(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VPSHUFB X2, X13, X2
	VPSHUFB X3, X13, X3
	VPMOVSXBD X2, Y4
	VPSRLDQ $8, X2, X2
	VPMOVSXBD X2, Y5
	VPMOVSXBD X3, Y6
	VPSRLDQ $8, X3, X3
	VPMOVSXBD X3, Y7
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VMULPS (DI), Y4, Y8
	VFMADD231PS 32(DI), Y5, Y8
	VFMADD231PS 64(DI), Y6, Y8
	VFMADD231PS 96(DI), Y7, Y8
	MOVBLZX (SI), AX
	VBROADCASTSS (R9)(AX*4), Y9
	VFMADD231PS Y8, Y9, Y0
	ADDQ $17, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  mfloop

	HSUM(Y0, X0, X1)
	MOVQ dst+40(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  mfrow
	VZEROUPPER
	RET

// Four activation rows against one weight row (prefill): each block's
// codes are decoded to floats once, scaled by 2^(e−128), and meet the four
// rows' activations.

// One row: acc += the block's values (Y4..Y7) times its 32 activations at base.
#define MXFP4_F32_ROW(o0, o1, o2, o3, acc) \
	VFMADD231PS o0, Y4, acc; \
	VFMADD231PS o1, Y5, acc; \
	VFMADD231PS o2, Y6, acc; \
	VFMADD231PS o3, Y7, acc

// func dotMXFP4F32x4AVX2(w *byte, x *float32, nb, xStride int, out *[4]float32, e8m0 *float32)
TEXT ·dotMXFP4F32x4AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ xStride+24(FP), R10
	SHLQ $2, R10
	LEAQ (R10)(R10*2), R11
	MOVQ e8m0+40(FP), R9
	CONSTS
	VMOVDQU mxfp4Values<>(SB), X13
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11

mf4loop:
	PF1
	VMOVDQU 1(SI), X2
	VPSRLW $4, X2, X3
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VPSHUFB X2, X13, X2
	VPSHUFB X3, X13, X3
	VPMOVSXBD X2, Y4
	VPSRLDQ $8, X2, X2
	VPMOVSXBD X2, Y5
	VPMOVSXBD X3, Y6
	VPSRLDQ $8, X3, X3
	VPMOVSXBD X3, Y7
	MOVBLZX (SI), AX
	VBROADCASTSS (R9)(AX*4), Y9
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VMULPS Y9, Y4, Y4
	VMULPS Y9, Y5, Y5
	VMULPS Y9, Y6, Y6
	VMULPS Y9, Y7, Y7
	MXFP4_F32_ROW((DI), 32(DI), 64(DI), 96(DI), Y0)
	MXFP4_F32_ROW((DI)(R10*1), 32(DI)(R10*1), 64(DI)(R10*1), 96(DI)(R10*1), Y1)
	MXFP4_F32_ROW((DI)(R10*2), 32(DI)(R10*2), 64(DI)(R10*2), 96(DI)(R10*2), Y10)
	MXFP4_F32_ROW((DI)(R11*1), 32(DI)(R11*1), 64(DI)(R11*1), 96(DI)(R11*1), Y11)
	ADDQ $17, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  mf4loop

	MOVQ out+32(FP), AX
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
