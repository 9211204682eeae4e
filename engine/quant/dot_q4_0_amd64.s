//go:build amd64

#include "textflag.h"
#include "simd_amd64.h"

// ---------------------------------------------------------------- Q4_0
// Two Q4_0 blocks A, B per step. Their 16 nibble bytes fill the two lanes:
// low nibbles are [A 0..15 | B 0..15], high nibbles [A 16..31 | B 16..31];
// the activations were laid out to match (64 bytes per pair). The unsigned
// nibbles u go through VPMADDUBSW and Σ(u-8)·y = Σu·y - 8Σy: pc holds
// 2Σy per lane (4 lanes per block). pd holds dy per lane.

// Q4_0 weights at woffA/woffB(SI) into Y2 (low nibbles), Y3 (high) and
// their scales, as floats [dA×4 | dB×4], into Y4.
#define Q4_0_PAIR_LOAD(woffA, woffB) \
	VMOVDQU woffA+2(SI), Y2; \
	VPBLENDD $0xF0, woffA+4(SI), Y2, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3; \
	VPBROADCASTW woffA(SI), X4; \
	VPBROADCASTW woffB(SI), X5; \
	VPUNPCKLQDQ X5, X4, X4; \
	VCVTPH2PS X4, Y4

// Nibbles only of the pair at woffA (B follows at +18).
#define Q4_0_PAIR_NIBBLES(woffA) \
	VMOVDQU woffA+2(SI), Y2; \
	VPBLENDD $0xF0, woffA+4(SI), Y2, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3

// The fp16 scales of 8 blocks, gathered in GPRs (whose ports are idle)
// and converted at once: Y10 = [d0 d2 d4 d6 | d1 d3 d5 d7]; VSHUFPS
// then spreads pair k's [d2k ×4 | d2k+1 ×4].
#define Q4_0_SCALES8 \
	MOVWLZX 108(SI), R10; \
	SHLQ $16, R10; \
	MOVWLZX 72(SI), R11; \
	ORQ R11, R10; \
	SHLQ $16, R10; \
	MOVWLZX 36(SI), R11; \
	ORQ R11, R10; \
	SHLQ $16, R10; \
	MOVWLZX (SI), R11; \
	ORQ R11, R10; \
	MOVWLZX 126(SI), BX; \
	SHLQ $16, BX; \
	MOVWLZX 90(SI), R11; \
	ORQ R11, BX; \
	SHLQ $16, BX; \
	MOVWLZX 54(SI), R11; \
	ORQ R11, BX; \
	SHLQ $16, BX; \
	MOVWLZX 18(SI), R11; \
	ORQ R11, BX; \
	VMOVQ R10, X10; \
	VPINSRQ $1, BX, X10, X10; \
	VCVTPH2PS X10, Y10

#define Q4_0_SINGLE_LOAD \
	VMOVDQU 2(SI), X2; \
	VINSERTI128 $1, X2, Y2, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3; \
	VPBROADCASTW (SI), X4; \
	VCVTPH2PS X4, Y4

// acc += (Σu·y - 8Σy)·dw·dy for the pair loaded above, activations at
// qaddr (64 bytes), daddr and caddr (32 bytes each).
#define Q4_0_PAIR_DOT(q0, q1, daddr, caddr, acc, T0, T1) \
	VPMADDUBSW q0, Y2, T0; \
	VPMADDUBSW q1, Y3, T1; \
	VPADDW T1, T0, T0; \
	VPMADDWD Y14, T0, T0; \
	VPSUBD caddr, T0, T0; \
	VCVTDQ2PS T0, T0; \
	VMULPS daddr, Y4, T1; \
	VFMADD231PS T0, T1, acc

// Rows r < rows of w (rowBytes apart) against one activation row:
// dst[r] = dot. R12 walks the rows, R13 counts them.

// func dotQ4_0AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, nb int, dst *float32)
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS

q40row:
	MOVQ R12, SI
	MOVQ px+24(FP), DI
	MOVQ pd+32(FP), R8
	MOVQ pc+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ CX, DX
	ANDQ $1, DX        // odd block left for the tail
	SHRQ $1, CX        // whole pairs
	SUBQ $4, CX
	JLT  q40two

q40loop4:
	PF3
	Q4_0_SCALES8
	Q4_0_PAIR_NIBBLES(0)
	VSHUFPS $0x00, Y10, Y10, Y4
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y0, Y6, Y7)
	Q4_0_PAIR_NIBBLES(36)
	VSHUFPS $0x55, Y10, Y10, Y4
	Q4_0_PAIR_DOT(64(DI), 96(DI), 32(R8), 32(R9), Y1, Y8, Y9)
	Q4_0_PAIR_NIBBLES(72)
	VSHUFPS $0xAA, Y10, Y10, Y4
	Q4_0_PAIR_DOT(128(DI), 160(DI), 64(R8), 64(R9), Y0, Y6, Y7)
	Q4_0_PAIR_NIBBLES(108)
	VSHUFPS $0xFF, Y10, Y10, Y4
	Q4_0_PAIR_DOT(192(DI), 224(DI), 96(R8), 96(R9), Y1, Y8, Y9)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $128, R8
	ADDQ $128, R9
	SUBQ $4, CX
	JGE  q40loop4

q40two:
	ADDQ $2, CX
	JLT  q40one
	Q4_0_PAIR_LOAD(0, 18)
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y0, Y6, Y7)
	Q4_0_PAIR_LOAD(36, 54)
	Q4_0_PAIR_DOT(64(DI), 96(DI), 32(R8), 32(R9), Y1, Y8, Y9)
	ADDQ $72, SI
	ADDQ $128, DI
	ADDQ $64, R8
	ADDQ $64, R9
	SUBQ $2, CX

q40one:
	ADDQ $2, CX
	JZ   q40odd
	Q4_0_PAIR_LOAD(0, 18)
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y0, Y6, Y7)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, R9

q40odd:
	TESTQ DX, DX
	JZ    q40done
	// B repeats A (in bounds); its activations and scales are zero.
	Q4_0_SINGLE_LOAD
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y1, Y6, Y7)

q40done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q40row
	VZEROUPPER
	RET

// func dotQ4_0x4AVX2(w *byte, px *int8, pd *float32, pc *int32, nb, pxStride, pdStride int, out *[4]float32)
TEXT ·dotQ4_0x4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ px+8(FP), DI
	MOVQ pd+16(FP), R8
	MOVQ pc+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ pxStride+40(FP), R10
	MOVQ pdStride+48(FP), R12
	LEAQ (R10)(R10*2), R11
	LEAQ (R12)(R12*2), R13
	CONSTS
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	MOVQ CX, DX
	ANDQ $1, DX
	SHRQ $1, CX
	JZ   q40x4odd

q40x4loop:
	PF1
	Q4_0_PAIR_LOAD(0, 18)
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y0, Y6, Y7)
	Q4_0_PAIR_DOT((DI)(R10*1), 32(DI)(R10*1), (R8)(R12*1), (R9)(R12*1), Y1, Y8, Y9)
	Q4_0_PAIR_DOT((DI)(R10*2), 32(DI)(R10*2), (R8)(R12*2), (R9)(R12*2), Y10, Y6, Y7)
	Q4_0_PAIR_DOT((DI)(R11*1), 32(DI)(R11*1), (R8)(R13*1), (R9)(R13*1), Y11, Y8, Y9)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q40x4loop

q40x4odd:
	TESTQ DX, DX
	JZ    q40x4done
	Q4_0_SINGLE_LOAD
	Q4_0_PAIR_DOT((DI), 32(DI), (R8), (R9), Y0, Y6, Y7)
	Q4_0_PAIR_DOT((DI)(R10*1), 32(DI)(R10*1), (R8)(R12*1), (R9)(R12*1), Y1, Y8, Y9)
	Q4_0_PAIR_DOT((DI)(R10*2), 32(DI)(R10*2), (R8)(R12*2), (R9)(R12*2), Y10, Y6, Y7)
	Q4_0_PAIR_DOT((DI)(R11*1), 32(DI)(R11*1), (R8)(R13*1), (R9)(R13*1), Y11, Y8, Y9)

q40x4done:
	MOVQ out+56(FP), AX
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
