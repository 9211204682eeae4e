//go:build amd64

#include "textflag.h"
#include "simd_amd64.h"

// ---------------------------------------------------------------- Q2_K
// 16 sub-blocks of 16: 4-bit scale (low) and min (high) per byte. A qs
// vector (32 bytes) shifted by 2k gives 32 consecutive elements, whose two
// sub-blocks' scales come from the Q6_K shuffles (bytes 2m, 2m+1). The
// mins term is one VPMADDWD of the 16 mins against the 16 bsums.

#define Q2_K_VEC(shift, yoff, moff) \
	VPSRLW $shift, Y2, Y3; \
	VPAND Y13, Y3, Y3; \
	VPMADDUBSW yoff(DI), Y3, Y3; \
	VPSHUFB q6kScaleShuf<>+moff(SB), X10, X11; \
	VPMOVZXBW X11, Y11; \
	VPMADDWD Y11, Y3, Y3; \
	VPADDD Y3, Y12, Y12

// func dotQ2_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	MOVQ $0x0303030303030303, AX
	VMOVQ AX, X13
	VPBROADCASTQ X13, Y13

q2krow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ bsums+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

q2kloop:
	PF2
	VMOVDQU (SI), X9
	VPAND X15, X9, X10      // scales
	VPSRLW $4, X9, X9
	VPAND X15, X9, X9       // mins
	VPMOVZXBW X9, Y9
	VPMADDWD (R9), Y9, Y9
	VCVTDQ2PS Y9, Y9
	VPXOR Y12, Y12, Y12
	VMOVDQU 16(SI), Y2
	Q2_K_VEC(0, 0, 0)
	Q2_K_VEC(2, 32, 16)
	Q2_K_VEC(4, 64, 32)
	Q2_K_VEC(6, 96, 48)
	VMOVDQU 48(SI), Y2
	Q2_K_VEC(0, 128, 64)
	Q2_K_VEC(2, 160, 80)
	Q2_K_VEC(4, 192, 96)
	Q2_K_VEC(6, 224, 112)
	VCVTDQ2PS Y12, Y12
	VBROADCASTSS (R8), Y6
	VPBROADCASTW 80(SI), X4
	VCVTPH2PS X4, Y4
	VMULPS Y6, Y4, Y4       // dy·d
	VFMADD231PS Y12, Y4, Y0
	VPBROADCASTW 82(SI), X5
	VCVTPH2PS X5, Y5
	VMULPS Y6, Y5, Y5       // dy·dmin
	VFMADD231PS Y9, Y5, Y1

	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q2kloop

	VSUBPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q2krow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q3_K
// u = 2 low bits | high-mask bit << 2, unsigned 0..7, and Σ(u-4)·y =
// Σu·y - 4·bsum per sub-block, applied once per block with the 16 scales.
// The 6-bit scales are unpacked in GPRs (ggml's kmask arithmetic, on
// 64-bit words). Y9 is
// the high mask, shifted right by one per vector so its bit 0 is the one.

#define Q3_K_VEC(shift, yoff, moff) \
	VPSRLW $shift, Y2, Y3; \
	VPAND Y13, Y3, Y3; \
	VPAND Y7, Y9, Y4; \
	VPSLLW $2, Y4, Y4; \
	VPOR Y4, Y3, Y3; \
	VPSRLW $1, Y9, Y9; \
	VPMADDUBSW yoff(DI), Y3, Y3; \
	VPSHUFB q6kScaleShuf<>+moff(SB), X10, X11; \
	VPMOVSXBW X11, Y11; \
	VPMADDWD Y11, Y3, Y3; \
	VPADDD Y3, Y12, Y12

// func dotQ3_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	MOVQ $0x0303030303030303, AX
	VMOVQ AX, X13
	VPBROADCASTQ X13, Y13
	MOVQ $0x0101010101010101, AX
	VMOVQ AX, X7
	VPBROADCASTQ X7, Y7
	MOVQ $0x2020202020202020, AX
	VMOVQ AX, X6
	VPBROADCASTQ X6, Y6     // 32

q3krow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ bsums+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0

q3kloop:
	PF2
	MOVQ 96(SI), AX         // aux0 | aux1<<32: the low 4 bits
	MOVL 104(SI), DX        // tmp: the high 2 bits
	MOVQ $0x0f0f0f0f0f0f0f0f, BX
	MOVQ AX, R10
	SHRQ $4, R10
	ANDQ BX, R10            // low bits of scales 8..15
	ANDQ BX, AX             // low bits of scales 0..7
	MOVQ $0x0303030303030303, BX
	MOVQ DX, R11
	SHRQ $2, R11
	SHLQ $32, R11
	ORQ  DX, R11            // [tmp | tmp>>2]
	ANDQ BX, R11
	SHLQ $4, R11
	ORQ  R11, AX            // scales 0..7
	MOVQ DX, R11
	SHRQ $6, R11
	SHLQ $32, R11
	SHRQ $4, DX
	ORQ  DX, R11            // [tmp>>4 | tmp>>6]
	ANDQ BX, R11
	SHLQ $4, R11
	ORQ  R11, R10           // scales 8..15
	VMOVQ AX, X10
	VPINSRQ $1, R10, X10, X10
	VPSUBB X6, X10, X10     // int8 scale - 32

	VMOVDQU (SI), Y9
	VPXOR Y12, Y12, Y12
	VMOVDQU 32(SI), Y2
	Q3_K_VEC(0, 0, 0)
	Q3_K_VEC(2, 32, 16)
	Q3_K_VEC(4, 64, 32)
	Q3_K_VEC(6, 96, 48)
	VMOVDQU 64(SI), Y2
	Q3_K_VEC(0, 128, 64)
	Q3_K_VEC(2, 160, 80)
	Q3_K_VEC(4, 192, 96)
	Q3_K_VEC(6, 224, 112)
	VPMOVSXBW X10, Y8
	VPMADDWD (R9), Y8, Y8
	VPSLLD $2, Y8, Y8
	VPSUBD Y8, Y12, Y12
	VCVTDQ2PS Y12, Y12
	VPBROADCASTW 108(SI), X4
	VCVTPH2PS X4, Y4
	VBROADCASTSS (R8), Y5
	VMULPS Y5, Y4, Y4
	VFMADD231PS Y12, Y4, Y0

	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q3kloop

	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q3krow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q4_K
// Per 256-block: unpack the 12 scale bytes into 8 scales and 8 mins
// (ggml's kmask arithmetic, in GPRs), Σ scale_j·Σu·y in int32 lanes, and
// the mins term Σ min_j·(bsum_2j + bsum_2j+1) with one VPMADDWD against
// the activation's 16 bsums (mins duplicated to pairs).

// Chunk j (64 elements): 32 weight bytes, low nibbles with scale 2j, high
// nibbles with scale 2j+1; int32 products into Y12/Y13.
#define Q4_K_CHUNK(woff, yoff, m0, m1) \
	VMOVDQU woff(SI), Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3; \
	VPMADDUBSW yoff(DI), Y2, Y2; \
	VPMADDUBSW yoff+32(DI), Y3, Y3; \
	VPSHUFB m0, Y8, Y4; \
	VPSHUFB m1, Y8, Y5; \
	VPMADDWD Y4, Y2, Y2; \
	VPMADDWD Y5, Y3, Y3; \
	VPADDD Y2, Y12, Y12; \
	VPADDD Y3, Y13, Y13

// func dotQ4_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS

q4krow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ bsums+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

q4kloop:
	PF3
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL DX, R10
	SHRL $4, R10
	ANDL $0x0f0f0f0f, R10
	MOVL BX, R11
	SHRL $6, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, R10           // mins 4..7
	ANDL $0x3f3f3f3f, BX    // mins 0..3
	ANDL $0x0f0f0f0f, DX
	MOVL AX, R11
	SHRL $6, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, DX            // scales 4..7
	ANDL $0x3f3f3f3f, AX    // scales 0..3
	SHLQ $32, DX
	ORQ  DX, AX
	SHLQ $32, R10
	ORQ  R10, BX
	VMOVQ AX, X8
	VPMOVZXBW X8, X8
	VPERMQ $0x44, Y8, Y8    // 8 scale words in both lanes
	VMOVQ BX, X9
	VPUNPCKLBW X9, X9, X9
	VPMOVZXBW X9, Y9        // m0 m0 m1 m1 ... m7 m7
	VPMADDWD (R9), Y9, Y9   // m_j·bsum pairs
	VCVTDQ2PS Y9, Y9

	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	Q4_K_CHUNK(16, 0, q4kScaleShuf<>+0(SB), q4kScaleShuf<>+32(SB))
	Q4_K_CHUNK(48, 64, q4kScaleShuf<>+64(SB), q4kScaleShuf<>+96(SB))
	Q4_K_CHUNK(80, 128, q4kScaleShuf<>+128(SB), q4kScaleShuf<>+160(SB))
	Q4_K_CHUNK(112, 192, q4kScaleShuf<>+192(SB), q4kScaleShuf<>+224(SB))
	VPADDD Y13, Y12, Y12
	VCVTDQ2PS Y12, Y12

	VBROADCASTSS (R8), Y6
	VPBROADCASTW (SI), X4
	VCVTPH2PS X4, Y4
	VMULPS Y6, Y4, Y4       // dy·d
	VFMADD231PS Y12, Y4, Y0
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS X5, Y5
	VMULPS Y6, Y5, Y5       // dy·dmin
	VFMADD231PS Y9, Y5, Y1

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q4kloop

	VSUBPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q4krow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q5_K
// Q4_K plus a fifth bit: qh byte l holds bit 2j (low nibbles of chunk j)
// and 2j+1 (high nibbles). Y11 = qh, shifted right by 2 per chunk, so the
// two bits wanted are always bits 0 and 1 (Y10 = 0x01, Y7 = 0x02 bytes).
#define Q5_K_CHUNK(woff, yoff, m0, m1) \
	VMOVDQU woff(SI), Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y15, Y2, Y2; \
	VPAND Y15, Y3, Y3; \
	VPAND Y10, Y11, Y4; \
	VPSLLW $4, Y4, Y4; \
	VPOR Y4, Y2, Y2; \
	VPAND Y7, Y11, Y5; \
	VPSLLW $3, Y5, Y5; \
	VPOR Y5, Y3, Y3; \
	VPSRLW $2, Y11, Y11; \
	VPMADDUBSW yoff(DI), Y2, Y2; \
	VPMADDUBSW yoff+32(DI), Y3, Y3; \
	VPSHUFB m0, Y8, Y4; \
	VPSHUFB m1, Y8, Y5; \
	VPMADDWD Y4, Y2, Y2; \
	VPMADDWD Y5, Y3, Y3; \
	VPADDD Y2, Y12, Y12; \
	VPADDD Y3, Y13, Y13

// func dotQ5_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	MOVQ $0x0101010101010101, AX
	VMOVQ AX, X10
	VPBROADCASTQ X10, Y10
	VPADDB Y10, Y10, Y7     // 0x02 bytes

q5krow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ bsums+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

q5kloop:
	PF3
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL DX, R10
	SHRL $4, R10
	ANDL $0x0f0f0f0f, R10
	MOVL BX, R11
	SHRL $6, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, R10           // mins 4..7
	ANDL $0x3f3f3f3f, BX    // mins 0..3
	ANDL $0x0f0f0f0f, DX
	MOVL AX, R11
	SHRL $6, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	ORL  R11, DX            // scales 4..7
	ANDL $0x3f3f3f3f, AX    // scales 0..3
	SHLQ $32, DX
	ORQ  DX, AX
	SHLQ $32, R10
	ORQ  R10, BX
	VMOVQ AX, X8
	VPMOVZXBW X8, X8
	VPERMQ $0x44, Y8, Y8    // 8 scale words in both lanes
	VMOVQ BX, X9
	VPUNPCKLBW X9, X9, X9
	VPMOVZXBW X9, Y9        // m0 m0 m1 m1 ... m7 m7
	VPMADDWD (R9), Y9, Y9   // m_j·bsum pairs
	VCVTDQ2PS Y9, Y9

	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VMOVDQU 16(SI), Y11     // high bits
	Q5_K_CHUNK(48, 0, q4kScaleShuf<>+0(SB), q4kScaleShuf<>+32(SB))
	Q5_K_CHUNK(80, 64, q4kScaleShuf<>+64(SB), q4kScaleShuf<>+96(SB))
	Q5_K_CHUNK(112, 128, q4kScaleShuf<>+128(SB), q4kScaleShuf<>+160(SB))
	Q5_K_CHUNK(144, 192, q4kScaleShuf<>+192(SB), q4kScaleShuf<>+224(SB))
	VPADDD Y13, Y12, Y12
	VCVTDQ2PS Y12, Y12

	VBROADCASTSS (R8), Y6
	VPBROADCASTW (SI), X4
	VCVTPH2PS X4, Y4
	VMULPS Y6, Y4, Y4       // dy·d
	VFMADD231PS Y12, Y4, Y0
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS X5, Y5
	VMULPS Y6, Y5, Y5       // dy·dmin
	VFMADD231PS Y9, Y5, Y1

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q5kloop

	VSUBPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q5krow
	VZEROUPPER
	RET

// ---------------------------------------------------------------- Q6_K
// q = ql nibble | 2 bits of qh << 4, unsigned 0..63; Σ(q-32)·y =
// Σq·y - 32·bsum per 16 elements, done once per block with VPMADDWD of the
// 16 scales against the 16 bsums.

// One 32-element vector: q in Q, activations at yaddr, scales by mask m.
#define Q6_K_DOT(Q, yaddr, m) \
	VPMADDUBSW yaddr, Q, Q; \
	VPSHUFB m, X10, X11; \
	VPMOVSXBW X11, Y11; \
	VPMADDWD Y11, Q, Q; \
	VPADDD Q, Y12, Y12

// Half h: 64 ql bytes at qloff, 32 qh bytes at qhoff, activations at yoff.
#define Q6_K_HALF(qloff, qhoff, yoff, moff) \
	VMOVDQU qloff(SI), Y2; \
	VMOVDQU qloff+32(SI), Y3; \
	VMOVDQU qhoff(SI), Y4; \
	VPAND Y15, Y2, Y5; \
	VPSLLW $4, Y4, Y6; \
	VPAND Y13, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	VPAND Y15, Y3, Y6; \
	VPSLLW $2, Y4, Y7; \
	VPAND Y13, Y7, Y7; \
	VPOR Y7, Y6, Y6; \
	VPSRLW $4, Y2, Y7; \
	VPAND Y15, Y7, Y7; \
	VPAND Y13, Y4, Y8; \
	VPOR Y8, Y7, Y7; \
	VPSRLW $4, Y3, Y8; \
	VPAND Y15, Y8, Y8; \
	VPSRLW $2, Y4, Y9; \
	VPAND Y13, Y9, Y9; \
	VPOR Y9, Y8, Y8; \
	Q6_K_DOT(Y5, yoff(DI), q6kScaleShuf<>+moff(SB)); \
	Q6_K_DOT(Y6, yoff+32(DI), q6kScaleShuf<>+moff+16(SB)); \
	Q6_K_DOT(Y7, yoff+64(DI), q6kScaleShuf<>+moff+32(SB)); \
	Q6_K_DOT(Y8, yoff+96(DI), q6kScaleShuf<>+moff+48(SB))

// func dotQ6_KAVX2(w *byte, rowBytes, rows int, xq *int8, xd *float32, bsums *int16, nb int, dst *float32)
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), R12
	XORQ R13, R13
	CONSTS
	MOVQ $0x3030303030303030, AX
	VMOVQ AX, X13
	VPBROADCASTQ X13, Y13

q6krow:
	MOVQ R12, SI
	MOVQ xq+24(FP), DI
	MOVQ xd+32(FP), R8
	MOVQ bsums+40(FP), R9
	MOVQ nb+48(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

q6kloop:
	PF4
	VMOVDQU 192(SI), X10    // 16 int8 scales
	VPXOR Y12, Y12, Y12
	Q6_K_HALF(0, 128, 0, 0)
	Q6_K_HALF(64, 160, 128, 64)
	VPMOVSXBW X10, Y9
	VPMADDWD (R9), Y9, Y9
	VPSLLD $5, Y9, Y9
	VPSUBD Y9, Y12, Y12
	VCVTDQ2PS Y12, Y12
	VPBROADCASTW 208(SI), X4
	VCVTPH2PS X4, Y4
	VBROADCASTSS (R8), Y6
	VMULPS Y6, Y4, Y4
	VFMADD231PS Y12, Y4, Y0

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  q6kloop

	HSUM(Y0, X0, X1)
	MOVQ dst+56(FP), AX
	MOVSS X0, (AX)(R13*4)
	ADDQ rowBytes+8(FP), R12
	INCQ R13
	CMPQ R13, rows+16(FP)
	JLT  q6krow
	VZEROUPPER
	RET

DATA q4kScaleShuf<>+0(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+8(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+16(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+24(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+32(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+40(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+48(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+56(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+64(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+72(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+80(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+88(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+96(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+104(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+112(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+120(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+128(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+136(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+144(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+152(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q4kScaleShuf<>(SB), RODATA|NOPTR, $256
DATA q6kScaleShuf<>+0(SB)/8, $0x0000000000000000
DATA q6kScaleShuf<>+8(SB)/8, $0x0101010101010101
DATA q6kScaleShuf<>+16(SB)/8, $0x0202020202020202
DATA q6kScaleShuf<>+24(SB)/8, $0x0303030303030303
DATA q6kScaleShuf<>+32(SB)/8, $0x0404040404040404
DATA q6kScaleShuf<>+40(SB)/8, $0x0505050505050505
DATA q6kScaleShuf<>+48(SB)/8, $0x0606060606060606
DATA q6kScaleShuf<>+56(SB)/8, $0x0707070707070707
DATA q6kScaleShuf<>+64(SB)/8, $0x0808080808080808
DATA q6kScaleShuf<>+72(SB)/8, $0x0909090909090909
DATA q6kScaleShuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6kScaleShuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6kScaleShuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6kScaleShuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6kScaleShuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6kScaleShuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6kScaleShuf<>(SB), RODATA|NOPTR, $128
