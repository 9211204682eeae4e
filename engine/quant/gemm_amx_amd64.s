//go:build amd64

#include "textflag.h"

// The Q4_0 prefill GEMM tile with AMX (gemm.go): C = A·B in int32 per
// block, A the 16 activation rows (16×32 signed bytes, the tile layout of
// acts), B the 16 weight rows unpacked to signed bytes u-8 in the tile's
// VNNI form (8 rows of 16×4 bytes, packQ4_0GroupAMX). C row j holds the 16
// weight rows' Σ(u-8)·y for activation row j; then, as in the AVX-512
// kernel, acc_j += float(C_j)·(dw·dy_j), so both give the same bits.
//
// The Go assembler has no AMX mnemonics; the instructions are encoded by
// hand (checked against GNU as): tile 0 = A, 1 = B, 2 to 4 = C.

// TILELOADD tmm0, [DI + BX*1]
#define LOAD_A BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x04; BYTE $0x1f
// TILELOADD tmm1, [SI + AX*1]
#define LOAD_B BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x0c; BYTE $0x06
// TILEZERO tmm2 / tmm3 / tmm4
#define ZERO_C0 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0
#define ZERO_C1 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8
#define ZERO_C2 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xe0
// TDPBSSD tmm2 / tmm3 / tmm4, tmm0, tmm1 (the weights are 0..15, so
// signed is unsigned)
#define DOT_C0 BYTE $0xc4; BYTE $0xe2; BYTE $0x73; BYTE $0x5e; BYTE $0xd0
#define DOT_C1 BYTE $0xc4; BYTE $0xe2; BYTE $0x73; BYTE $0x5e; BYTE $0xd8
#define DOT_C2 BYTE $0xc4; BYTE $0xe2; BYTE $0x73; BYTE $0x5e; BYTE $0xe0
// TILESTORED [DX + AX*1], tmm2 / [CX + AX*1], tmm3 / [R12 + AX*1], tmm4
#define STORE_C0 BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x02
#define STORE_C1 BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x1c; BYTE $0x01
#define STORE_C2 BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x24; BYTE $0x04
// LDTILECFG [AX]
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0

// The tile products of the next block into C0 (buffer DX) or C1 (CX).
#define AMX_BLOCK(ZERO, DOT, STORE) \
	LOAD_A; \
	LOAD_B; \
	ZERO; \
	DOT; \
	STORE; \
	ADDQ $544, SI; \
	ADDQ $512, DI

// Activation row j's C row at cj(buf), its scale at c(R8).
#define AMX_ROW(buf, cj, c, acc, T, S) \
	VCVTDQ2PS cj(buf), T; \
	VMULPS.BCST c(R8), Z8, S; \
	VFMADD231PS T, S, acc

// The float part of the block whose products are in buf; R10 points at its
// weight scales.
#define AMX_FLOAT(buf) \
	VCVTPH2PS (R10), Z8; \
	AMX_ROW(buf, 0, 0, Z16, Z9, Z10); \
	AMX_ROW(buf, 64, 4, Z17, Z11, Z12); \
	AMX_ROW(buf, 128, 8, Z18, Z13, Z14); \
	AMX_ROW(buf, 192, 12, Z19, Z9, Z10); \
	AMX_ROW(buf, 256, 16, Z20, Z11, Z12); \
	AMX_ROW(buf, 320, 20, Z21, Z13, Z14); \
	AMX_ROW(buf, 384, 24, Z22, Z9, Z10); \
	AMX_ROW(buf, 448, 28, Z23, Z11, Z12); \
	AMX_ROW(buf, 512, 32, Z24, Z13, Z14); \
	AMX_ROW(buf, 576, 36, Z25, Z9, Z10); \
	AMX_ROW(buf, 640, 40, Z26, Z11, Z12); \
	AMX_ROW(buf, 704, 44, Z27, Z13, Z14); \
	AMX_ROW(buf, 768, 48, Z28, Z9, Z10); \
	AMX_ROW(buf, 832, 52, Z29, Z11, Z12); \
	AMX_ROW(buf, 896, 56, Z30, Z13, Z14); \
	AMX_ROW(buf, 960, 60, Z31, Z9, Z10); \
	ADDQ $544, R10; \
	ADDQ $64, R8

// func gemmQ4_0x16AMX(w *byte, nb int, aq *int8, ad *float32, out *[256]float32, cbuf *int32, cfg *byte)
// Software-pipelined: the tile unit computes block b into one of three C
// tiles and buffers (cbuf, 3×1 KB: DX, CX, R12) while the vector units
// scale block b-2. The distance 2 matters: a tile store is not forwarded
// to loads, which wait until it retires and reaches the cache. R11 counts
// the blocks left to multiply, R13 those left to scale.
TEXT ·gemmQ4_0x16AMX(SB), NOSPLIT, $0-56
	MOVQ cfg+48(FP), AX
	LDTILECFG_AX
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), R11
	MOVQ R11, R13
	MOVQ aq+16(FP), DI
	MOVQ ad+24(FP), R8
	MOVQ cbuf+40(FP), DX
	LEAQ 1024(DX), CX
	LEAQ 2048(DX), R12
	LEAQ 512(SI), R10
	MOVQ $32, BX
	MOVQ $64, AX
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

	// Blocks 0 and 1 (nb >= 1).
	AMX_BLOCK(ZERO_C0, DOT_C0, STORE_C0)
	DECQ R11
	JZ   amxphase2
	AMX_BLOCK(ZERO_C1, DOT_C1, STORE_C1)
	DECQ R11

amxphase2:
	TESTQ R11, R11
	JZ    amxfloat0
	AMX_BLOCK(ZERO_C2, DOT_C2, STORE_C2)
	DECQ  R11

amxfloat0:
	AMX_FLOAT(DX)
	DECQ R13
	JZ   amxdone
	TESTQ R11, R11
	JZ    amxfloat1
	AMX_BLOCK(ZERO_C0, DOT_C0, STORE_C0)
	DECQ  R11

amxfloat1:
	AMX_FLOAT(CX)
	DECQ R13
	JZ   amxdone
	TESTQ R11, R11
	JZ    amxfloat2
	AMX_BLOCK(ZERO_C1, DOT_C1, STORE_C1)
	DECQ  R11

amxfloat2:
	AMX_FLOAT(R12)
	DECQ R13
	JNZ  amxphase2

amxdone:
	TILERELEASE
	MOVQ out+32(FP), AX
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

// func packQ4_0GroupAMXAsm(dst, w *byte, rb, nb int)
// packQ4_0GroupAMX in assembly: the transpose of packQ4_0GroupAVX, each
// vector then stored as its low nibbles (row k) and high ones (row k+4),
// less 8.
TEXT ·packQ4_0GroupAMXAsm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), BX
	MOVQ nb+24(FP), CX
	LEAQ (BX)(BX*2), R8 // 3 rows
	MOVQ BX, R9
	SHLQ $2, R9         // 4 rows
	MOVQ $0x0F0F0F0F0F0F0F0F, AX
	VMOVQ AX, X15
	VPBROADCASTQ X15, X15
	MOVQ $0x0808080808080808, AX
	VMOVQ AX, X14
	VPBROADCASTQ X14, X14

amxpackblock:
	MOVQ SI, DX
	XORQ R10, R10

amxpackquad:
	VMOVDQU 2(DX), X0
	VMOVDQU 2(DX)(BX*1), X1
	VMOVDQU 2(DX)(BX*2), X2
	VMOVDQU 2(DX)(R8*1), X3
	VPUNPCKLDQ X1, X0, X4
	VPUNPCKHDQ X1, X0, X5
	VPUNPCKLDQ X3, X2, X6
	VPUNPCKHDQ X3, X2, X7
	VPUNPCKLQDQ X6, X4, X0
	VPUNPCKHQDQ X6, X4, X1
	VPUNPCKLQDQ X7, X5, X2
	VPUNPCKHQDQ X7, X5, X3
	VPSRLW $4, X0, X4
	VPSRLW $4, X1, X5
	VPSRLW $4, X2, X6
	VPSRLW $4, X3, X7
	VPAND X15, X0, X0
	VPAND X15, X1, X1
	VPAND X15, X2, X2
	VPAND X15, X3, X3
	VPAND X15, X4, X4
	VPAND X15, X5, X5
	VPAND X15, X6, X6
	VPAND X15, X7, X7
	VPSUBB X14, X0, X0
	VPSUBB X14, X1, X1
	VPSUBB X14, X2, X2
	VPSUBB X14, X3, X3
	VPSUBB X14, X4, X4
	VPSUBB X14, X5, X5
	VPSUBB X14, X6, X6
	VPSUBB X14, X7, X7
	VMOVDQU X0, (DI)(R10*4)
	VMOVDQU X1, 64(DI)(R10*4)
	VMOVDQU X2, 128(DI)(R10*4)
	VMOVDQU X3, 192(DI)(R10*4)
	VMOVDQU X4, 256(DI)(R10*4)
	VMOVDQU X5, 320(DI)(R10*4)
	VMOVDQU X6, 384(DI)(R10*4)
	VMOVDQU X7, 448(DI)(R10*4)
	MOVW (DX), AX
	MOVW AX, 512(DI)(R10*2)
	MOVW (DX)(BX*1), AX
	MOVW AX, 514(DI)(R10*2)
	MOVW (DX)(BX*2), AX
	MOVW AX, 516(DI)(R10*2)
	MOVW (DX)(R8*1), AX
	MOVW AX, 518(DI)(R10*2)
	ADDQ R9, DX
	ADDQ $4, R10
	CMPQ R10, $16
	JLT  amxpackquad

	ADDQ $18, SI
	ADDQ $544, DI
	DECQ CX
	JNZ  amxpackblock
	VZEROUPPER
	RET
