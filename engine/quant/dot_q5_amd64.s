//go:build amd64

#include "textflag.h"
#include "simd_amd64.h"

// ------------------------------------------------- Q5_0, Q4_1, Q5_1
// The pair scheme of Q4_0. Q5: the fifth bits come from the 32-bit qh of
// each block: byte i of a lane picks qh byte i/8 (VPSHUFB), ORs in every
// bit but i%8 and compares with all-ones, giving 0xFF where bit i is set;
// & 0x10 lands it on bit 4. Q4_1/Q5_1 add m·s: ps holds s/4 per lane.
// Constants: Y13/Y9 the low/high byte shuffles, Y12 the bit masks, Y11
// all-ones, Y10 0x10 bytes.
#define Q5_CONSTS \
	VMOVDQU q5ShufLo<>(SB), Y13; \
	VMOVDQU q5ShufHi<>(SB), Y9; \
	VMOVDQU q5BitMask<>(SB), Y12; \
	VPCMPEQB Y11, Y11, Y11; \
	VPSUBB Y11, Y15, Y10

// Y5 = [qhA ×4 | qhB ×4] → bit 4 of the nibbles in Y2 (low) and Y3 (high).
#define Q5_HIGH_BITS \
	VPSHUFB Y13, Y5, Y6; \
	VPOR Y12, Y6, Y6; \
	VPCMPEQB Y11, Y6, Y6; \
	VPAND Y10, Y6, Y6; \
	VPOR Y6, Y2, Y2; \
	VPSHUFB Y9, Y5, Y7; \
	VPOR Y12, Y7, Y7; \
	VPCMPEQB Y11, Y7, Y7; \
	VPAND Y10, Y7, Y7; \
	VPOR Y7, Y3, Y3

// Nibbles of a pair into Y2/Y3 from the quants at qoff, the second block's
// 16 bytes being at qoff+bs, read as lane 1 of a load at qoff+bs-16.
#define PAIR_NIBBLES(qoff, qoff2) \
	VMOVDQU qoff(SI), Y2; \
	VPBLENDD $0xF0, qoff2(SI), Y2, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3

// A lone block (odd tail): both lanes hold its nibbles.
#define SINGLE_NIBBLES(qoff) \
	VMOVDQU qoff(SI), X2; \
	VINSERTI128 $1, X2, Y2, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3

// Two fp16 at offA/offB as floats [A ×4 | B ×4] in YF (XF its low half).
#define PAIR_HALVES(offA, offB, XF, YF, XT) \
	VPBROADCASTW offA(SI), XF; \
	VPBROADCASTW offB(SI), XT; \
	VPUNPCKLQDQ XT, XF, XF; \
	VCVTPH2PS XF, YF

// Σu·y of a pair into 8 int32 lanes of Y6 ([A ×4 | B ×4]).
#define PAIR_SUMS \
	VPMADDUBSW (DI), Y2, Y6; \
	VPMADDUBSW 32(DI), Y3, Y7; \
	VPADDW Y7, Y6, Y6; \
	VPMADDWD Y14, Y6, Y6

// Y0 += lanes·dw·dy (dw in Y4).
#define PAIR_SCALE_ACC \
	VCVTDQ2PS Y6, Y6; \
	VMULPS (R8), Y4, Y7; \
	VFMADD231PS Y6, Y7, Y0

// func dotQ5_0AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	Q5_CONSTS

q50row:
	MOVQ R12, SI
	MOVQ px+24(FP), DI
	MOVQ pd+32(FP), R8
	MOVQ pc+40(FP), R9
	MOVQ ps+48(FP), R10
	MOVQ nb+56(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ CX, DX
	ANDQ $1, DX
	SHRQ $1, CX
	JZ   q50odd

q50loop:
	PF1
	PAIR_NIBBLES(6, 12)
	VPBROADCASTD 2(SI), Y5
	VPBROADCASTD 24(SI), Y6
	VPBLENDD $0xF0, Y6, Y5, Y5
	Q5_HIGH_BITS
	PAIR_HALVES(0, 22, X4, Y4, X5)
	PAIR_SUMS
	VPSUBD (R9), Y6, Y6
	PAIR_SCALE_ACC
	ADDQ $44, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q50loop

q50odd:
	TESTQ DX, DX
	JZ    q50done
	SINGLE_NIBBLES(6)
	VPBROADCASTD 2(SI), Y5
	Q5_HIGH_BITS
	PAIR_HALVES(0, 0, X4, Y4, X5)
	PAIR_SUMS
	VPSUBD (R9), Y6, Y6
	PAIR_SCALE_ACC

q50done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+64(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q50row
	VZEROUPPER
	RET

// func dotQ4_1AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	Q5_CONSTS

q41row:
	MOVQ R12, SI
	MOVQ px+24(FP), DI
	MOVQ pd+32(FP), R8
	MOVQ pc+40(FP), R9
	MOVQ ps+48(FP), R10
	MOVQ nb+56(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ CX, DX
	ANDQ $1, DX
	SHRQ $1, CX
	JZ   q41odd

q41loop:
	PF1
	PAIR_NIBBLES(4, 8)
	PAIR_HALVES(0, 20, X4, Y4, X5)
	PAIR_SUMS
	PAIR_SCALE_ACC
	PAIR_HALVES(2, 22, X5, Y5, X7)
	VFMADD231PS (R10), Y5, Y1
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q41loop

q41odd:
	TESTQ DX, DX
	JZ    q41done
	SINGLE_NIBBLES(4)
	PAIR_HALVES(0, 0, X4, Y4, X5)
	PAIR_SUMS
	PAIR_SCALE_ACC
	PAIR_HALVES(2, 2, X5, Y5, X7)
	VFMADD231PS (R10), Y5, Y1

q41done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+64(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q41row
	VZEROUPPER
	RET

// func dotQ5_1AVX2(w *byte, rowBytes, rows int, px *int8, pd *float32, pc *int32, ps *float32, nb int, dst *float32)
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	Q5_CONSTS

q51row:
	MOVQ R12, SI
	MOVQ px+24(FP), DI
	MOVQ pd+32(FP), R8
	MOVQ pc+40(FP), R9
	MOVQ ps+48(FP), R10
	MOVQ nb+56(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ CX, DX
	ANDQ $1, DX
	SHRQ $1, CX
	JZ   q51odd

q51loop:
	PF1
	PAIR_NIBBLES(8, 16)
	VPBROADCASTD 4(SI), Y5
	VPBROADCASTD 28(SI), Y6
	VPBLENDD $0xF0, Y6, Y5, Y5
	Q5_HIGH_BITS
	PAIR_HALVES(0, 24, X4, Y4, X5)
	PAIR_SUMS
	PAIR_SCALE_ACC
	PAIR_HALVES(2, 26, X5, Y5, X7)
	VFMADD231PS (R10), Y5, Y1
	ADDQ $48, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q51loop

q51odd:
	TESTQ DX, DX
	JZ    q51done
	SINGLE_NIBBLES(8)
	VPBROADCASTD 4(SI), Y5
	Q5_HIGH_BITS
	PAIR_HALVES(0, 0, X4, Y4, X5)
	PAIR_SUMS
	PAIR_SCALE_ACC
	PAIR_HALVES(2, 2, X5, Y5, X7)
	VFMADD231PS (R10), Y5, Y1

q51done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+64(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q51row
	VZEROUPPER
	RET

DATA q5ShufLo<>+0(SB)/8, $0x0000000000000000
DATA q5ShufLo<>+8(SB)/8, $0x0101010101010101
DATA q5ShufLo<>+16(SB)/8, $0x0000000000000000
DATA q5ShufLo<>+24(SB)/8, $0x0101010101010101
GLOBL q5ShufLo<>(SB), RODATA|NOPTR, $32
DATA q5ShufHi<>+0(SB)/8, $0x0202020202020202
DATA q5ShufHi<>+8(SB)/8, $0x0303030303030303
DATA q5ShufHi<>+16(SB)/8, $0x0202020202020202
DATA q5ShufHi<>+24(SB)/8, $0x0303030303030303
GLOBL q5ShufHi<>(SB), RODATA|NOPTR, $32
DATA q5BitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5BitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5BitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5BitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL q5BitMask<>(SB), RODATA|NOPTR, $32
