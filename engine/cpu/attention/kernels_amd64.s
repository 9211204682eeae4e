// AVX2 + FMA + F16C block kernels (see kernels_amd64.go for the contract
// of each; the portable Go versions in kernels_go.go are the definition).
// Per block of 32 tokens and GQA group: scores read each token's K once
// for up to 4 heads (q from memory, one FMA per 8 elements per head), the
// per-token horizontal sums deferred to one pass per 8 tokens; q4 V codes
// are widened in registers and feed 4 heads at once (other V: widened to
// floats once into an L1 block, then heads go in pairs). Decode on a CPU is
// bound by FMA issue, not by the memory bus, for q4: the shuffles and
// conversions around the FMAs are what these layouts keep few.

#include "textflag.h"

// Macros first: go vet reads lines after a TEXT as that function's.

// Q4UNPACK widens the 16 code bytes at (BX) to 32 floats in lane order:
// Y0 = low nibbles of bytes 0-7, Y1 = their high nibbles, Y2, Y3 the same
// for bytes 8-15. Y15 holds 15 in every dword.
#define Q4UNPACK \
	VPMOVZXBD (BX), Y0;   \
	VPMOVZXBD 8(BX), Y2;  \
	VPSRLD    $4, Y0, Y1; \
	VPSRLD    $4, Y2, Y3; \
	VPAND     Y15, Y0, Y0; \
	VPAND     Y15, Y2, Y2; \
	VCVTDQ2PS Y0, Y0;     \
	VCVTDQ2PS Y1, Y1;     \
	VCVTDQ2PS Y2, Y2;     \
	VCVTDQ2PS Y3, Y3

// Q8UNPACK widens the 32 code bytes at (BX) to 32 floats.
#define Q8UNPACK \
	VPMOVZXBD (BX), Y0;   \
	VPMOVZXBD 8(BX), Y1;  \
	VPMOVZXBD 16(BX), Y2; \
	VPMOVZXBD 24(BX), Y3; \
	VCVTDQ2PS Y0, Y0;     \
	VCVTDQ2PS Y1, Y1;     \
	VCVTDQ2PS Y2, Y2;     \
	VCVTDQ2PS Y3, Y3

// FMA4 adds the dot of Y0..Y3 with the 32 floats at a0..a3 into T.
#define FMA4(a0, a1, a2, a3, T) \
	VFMADD231PS a0, Y0, T; \
	VFMADD231PS a1, Y1, T; \
	VFMADD231PS a2, Y2, T; \
	VFMADD231PS a3, Y3, T

// HSUM4STORE reduces Y4..Y7 (one head each) and stores the sums for the
// first hn heads at (DI), 128(DI), 256(DI), 384(DI) (score rows of 32).
#define HSUM4STORE(hn, done) \
	VHADDPS      Y5, Y4, Y8;      \
	VHADDPS      Y7, Y6, Y9;      \
	VHADDPS      Y9, Y8, Y8;      \
	VEXTRACTF128 $1, Y8, X9;      \
	VADDPS       X9, X8, X8;      \
	VMOVSS       X8, (DI);        \
	CMPQ         hn, $1;          \
	JEQ          done;            \
	VEXTRACTPS   $1, X8, 128(DI); \
	CMPQ         hn, $2;          \
	JEQ          done;            \
	VEXTRACTPS   $2, X8, 256(DI); \
	CMPQ         hn, $3;          \
	JEQ          done;            \
	VEXTRACTPS   $3, X8, 384(DI)

// CODESCORES is the body of q4/q8 scores: for each of nb tokens, up to 4
// heads: score = Σ_g s_g·(q'·n)_g + Σ_lanes meta·qsI (the b·Σq' terms).
// UNPACK fills Y0..Y3 from (BX); step is its code bytes per 32 elements.
#define CODESCORES(UNPACK, step) \
	MOVQ         sc+0(FP), DI;        \
	MOVQ         codes+24(FP), BX;    \
	MOVQ         meta+32(FP), R9;     \
	MOVQ         d+48(FP), DX;        \
	SHLQ         $2, DX;              \
	LEAQ         (DX)(DX*2), R11;     \
	MOVQ         qsI+16(FP), R8;      \
	MOVQ         ms+64(FP), R12;      \
	SHLQ         $2, R12;             \
	MOVQ         nb+80(FP), CX;       \
	MOVL         $15, AX;             \
	VMOVD        AX, X15;             \
	VPBROADCASTD X15, Y15;            \
tok:                                  \
	VXORPS       Y4, Y4, Y4;          \
	VXORPS       Y5, Y5, Y5;          \
	VXORPS       Y6, Y6, Y6;          \
	VXORPS       Y7, Y7, Y7;          \
	MOVQ         q+8(FP), SI;         \
	MOVQ         R9, AX;              \
	MOVQ         d+48(FP), R10;       \
grp:                                  \
	VBROADCASTSS (AX), Y12;           \
	VXORPS       Y8, Y8, Y8;          \
	VXORPS       Y9, Y9, Y9;          \
	VXORPS       Y10, Y10, Y10;       \
	VXORPS       Y11, Y11, Y11;       \
	MOVQ         gs+56(FP), R13;      \
chunk:                                \
	UNPACK;                           \
	FMA4((SI), 32(SI), 64(SI), 96(SI), Y8); \
	CMPQ         hn+40(FP), $1;       \
	JEQ          chunkdone;           \
	FMA4((SI)(DX*1), 32(SI)(DX*1), 64(SI)(DX*1), 96(SI)(DX*1), Y9); \
	CMPQ         hn+40(FP), $2;       \
	JEQ          chunkdone;           \
	FMA4((SI)(DX*2), 32(SI)(DX*2), 64(SI)(DX*2), 96(SI)(DX*2), Y10); \
	CMPQ         hn+40(FP), $3;       \
	JEQ          chunkdone;           \
	FMA4((SI)(R11*1), 32(SI)(R11*1), 64(SI)(R11*1), 96(SI)(R11*1), Y11); \
chunkdone:                            \
	ADDQ         $step, BX;           \
	ADDQ         $128, SI;            \
	SUBQ         $32, R13;            \
	JNZ          chunk;               \
	VFMADD231PS  Y12, Y8, Y4;         \
	VFMADD231PS  Y12, Y9, Y5;         \
	VFMADD231PS  Y12, Y10, Y6;        \
	VFMADD231PS  Y12, Y11, Y7;        \
	ADDQ         $8, AX;              \
	SUBQ         gs+56(FP), R10;      \
	JNZ          grp;                 \
	MOVQ         lanes+72(FP), R13;   \
	MOVQ         R9, AX;              \
	MOVQ         R8, R10;             \
bias:                                 \
	VMOVUPS      (AX), Y12;           \
	VFMADD231PS  (R10), Y12, Y4;      \
	CMPQ         hn+40(FP), $1;       \
	JEQ          biasnext;            \
	VFMADD231PS  (R10)(R12*1), Y12, Y5; \
	CMPQ         hn+40(FP), $2;       \
	JEQ          biasnext;            \
	VFMADD231PS  (R10)(R12*2), Y12, Y6; \
	CMPQ         hn+40(FP), $3;       \
	JEQ          biasnext;            \
	LEAQ         (R10)(R12*2), SI;    \
	VFMADD231PS  (SI)(R12*1), Y12, Y7; \
biasnext:                             \
	ADDQ         $32, AX;             \
	ADDQ         $32, R10;            \
	SUBQ         $8, R13;             \
	JNZ          bias;                \
	MOVQ         hn+40(FP), SI;       \
	HSUM4STORE(SI, stored);           \
stored:                               \
	ADDQ         $4, DI;              \
	ADDQ         R12, R9;             \
	DECQ         CX;                  \
	JNZ          tok;                 \
	VZEROUPPER;                       \
	RET

// FLOATSCORES is the body of f16/f32 scores: plain dots of up to 4 heads
// with nb keys of d elements. LOAD4 fills Y0..Y3 from (BX) (32 elements),
// LOAD1 fills Y0 (8 elements); s32, s8 are their byte steps.
#define FLOATSCORES(LOAD4, LOAD1, s32, s8) \
	MOVQ        sc+0(FP), DI;       \
	MOVQ        k+16(FP), BX;       \
	MOVQ        d+32(FP), DX;       \
	SHLQ        $2, DX;             \
	LEAQ        (DX)(DX*2), R11;    \
	MOVQ        nb+40(FP), CX;      \
ftok:                               \
	VXORPS      Y4, Y4, Y4;         \
	VXORPS      Y5, Y5, Y5;         \
	VXORPS      Y6, Y6, Y6;         \
	VXORPS      Y7, Y7, Y7;         \
	MOVQ        q+8(FP), SI;        \
	MOVQ        d+32(FP), R10;      \
f32c:                               \
	CMPQ        R10, $32;           \
	JB          f8c;                \
	LOAD4;                          \
	FMA4((SI), 32(SI), 64(SI), 96(SI), Y4); \
	CMPQ        hn+24(FP), $1;      \
	JEQ         f32next;            \
	FMA4((SI)(DX*1), 32(SI)(DX*1), 64(SI)(DX*1), 96(SI)(DX*1), Y5); \
	CMPQ        hn+24(FP), $2;      \
	JEQ         f32next;            \
	FMA4((SI)(DX*2), 32(SI)(DX*2), 64(SI)(DX*2), 96(SI)(DX*2), Y6); \
	CMPQ        hn+24(FP), $3;      \
	JEQ         f32next;            \
	FMA4((SI)(R11*1), 32(SI)(R11*1), 64(SI)(R11*1), 96(SI)(R11*1), Y7); \
f32next:                            \
	ADDQ        $s32, BX;           \
	ADDQ        $128, SI;           \
	SUBQ        $32, R10;           \
	JMP         f32c;               \
f8c:                                \
	TESTQ       R10, R10;           \
	JEQ         fred;               \
	LOAD1;                          \
	VFMADD231PS (SI), Y0, Y4;       \
	CMPQ        hn+24(FP), $1;      \
	JEQ         f8next;             \
	VFMADD231PS (SI)(DX*1), Y0, Y5; \
	CMPQ        hn+24(FP), $2;      \
	JEQ         f8next;             \
	VFMADD231PS (SI)(DX*2), Y0, Y6; \
	CMPQ        hn+24(FP), $3;      \
	JEQ         f8next;             \
	VFMADD231PS (SI)(R11*1), Y0, Y7; \
f8next:                             \
	ADDQ        $s8, BX;            \
	ADDQ        $32, SI;            \
	SUBQ        $8, R10;            \
	JMP         f8c;                \
fred:                               \
	MOVQ        hn+24(FP), SI;      \
	HSUM4STORE(SI, fstored);        \
fstored:                            \
	ADDQ        $4, DI;             \
	DECQ        CX;                 \
	JNZ         ftok;               \
	VZEROUPPER;                     \
	RET

// HSUM4STORE4 reduces Y4..Y7 and stores all 4 head sums.
#define HSUM4STORE4 \
	VHADDPS      Y5, Y4, Y8;      \
	VHADDPS      Y7, Y6, Y9;      \
	VHADDPS      Y9, Y8, Y8;      \
	VEXTRACTF128 $1, Y8, X9;      \
	VADDPS       X9, X8, X8;      \
	VMOVSS       X8, (DI);        \
	VEXTRACTPS   $1, X8, 128(DI); \
	VEXTRACTPS   $2, X8, 256(DI); \
	VEXTRACTPS   $3, X8, 384(DI)

// REDUCE8 sums each of the 8 vectors at (src) (8 tokens' lanes, 32 bytes
// apart) and stores the 8 sums at (dst), in HSUM4STORE's order: lanes
// (0+1)+(2+3) and (4+5)+(6+7), then low + high.
#define REDUCE8(src, dst) \
	VMOVUPS    (src), Y0;           \
	VHADDPS    32(src), Y0, Y0;     \
	VMOVUPS    64(src), Y1;         \
	VHADDPS    96(src), Y1, Y1;     \
	VMOVUPS    128(src), Y2;        \
	VHADDPS    160(src), Y2, Y2;    \
	VMOVUPS    192(src), Y3;        \
	VHADDPS    224(src), Y3, Y3;    \
	VHADDPS    Y1, Y0, Y0;          \
	VHADDPS    Y3, Y2, Y2;          \
	VPERM2F128 $0x20, Y2, Y0, Y1;   \
	VPERM2F128 $0x31, Y2, Y0, Y3;   \
	VADDPS     Y3, Y1, Y1;          \
	VMOVUPS    Y1, (dst)

// CODESCORES4 is CODESCORES for exactly 4 heads, without per-head branches
// and with the four heads' FMAs interleaved. Each token's 4 head vectors go
// to red (rows of 32 tokens × 8 lanes per head); the horizontal sums are
// done afterwards 8 tokens at a time (REDUCE8), far cheaper than a
// per-token reduction, with the same additions in the same order.
#define CODESCORES4(UNPACK, step) \
	MOVQ         red+88(FP), DI;      \
	MOVQ         codes+24(FP), BX;    \
	MOVQ         meta+32(FP), R9;     \
	MOVQ         d+48(FP), DX;        \
	SHLQ         $2, DX;              \
	LEAQ         (DX)(DX*2), R11;     \
	MOVQ         qsI+16(FP), R8;      \
	MOVQ         ms+64(FP), R12;      \
	SHLQ         $2, R12;             \
	MOVQ         nb+80(FP), CX;       \
	MOVL         $15, AX;             \
	VMOVD        AX, X15;             \
	VPBROADCASTD X15, Y15;            \
tok:                                  \
	VXORPS       Y4, Y4, Y4;          \
	VXORPS       Y5, Y5, Y5;          \
	VXORPS       Y6, Y6, Y6;          \
	VXORPS       Y7, Y7, Y7;          \
	MOVQ         q+8(FP), SI;         \
	MOVQ         R9, AX;              \
	MOVQ         d+48(FP), R10;       \
grp:                                  \
	VBROADCASTSS (AX), Y12;           \
	UNPACK;                           \
	VMULPS       (SI), Y0, Y8;        \
	VMULPS       (SI)(DX*1), Y0, Y9;  \
	VMULPS       (SI)(DX*2), Y0, Y10; \
	VMULPS       (SI)(R11*1), Y0, Y11; \
	VFMADD231PS  32(SI), Y1, Y8;      \
	VFMADD231PS  32(SI)(DX*1), Y1, Y9; \
	VFMADD231PS  32(SI)(DX*2), Y1, Y10; \
	VFMADD231PS  32(SI)(R11*1), Y1, Y11; \
	VFMADD231PS  64(SI), Y2, Y8;      \
	VFMADD231PS  64(SI)(DX*1), Y2, Y9; \
	VFMADD231PS  64(SI)(DX*2), Y2, Y10; \
	VFMADD231PS  64(SI)(R11*1), Y2, Y11; \
	VFMADD231PS  96(SI), Y3, Y8;      \
	VFMADD231PS  96(SI)(DX*1), Y3, Y9; \
	VFMADD231PS  96(SI)(DX*2), Y3, Y10; \
	VFMADD231PS  96(SI)(R11*1), Y3, Y11; \
	ADDQ         $step, BX;           \
	ADDQ         $128, SI;            \
	CMPQ         gs+56(FP), $32;      \
	JEQ          grpdone;             \
	MOVQ         gs+56(FP), R13;      \
	SUBQ         $32, R13;            \
chunk:                                \
	UNPACK;                           \
	FMA4((SI), 32(SI), 64(SI), 96(SI), Y8); \
	FMA4((SI)(DX*1), 32(SI)(DX*1), 64(SI)(DX*1), 96(SI)(DX*1), Y9); \
	FMA4((SI)(DX*2), 32(SI)(DX*2), 64(SI)(DX*2), 96(SI)(DX*2), Y10); \
	FMA4((SI)(R11*1), 32(SI)(R11*1), 64(SI)(R11*1), 96(SI)(R11*1), Y11); \
	ADDQ         $step, BX;           \
	ADDQ         $128, SI;            \
	SUBQ         $32, R13;            \
	JNZ          chunk;               \
grpdone:                              \
	VFMADD231PS  Y12, Y8, Y4;         \
	VFMADD231PS  Y12, Y9, Y5;         \
	VFMADD231PS  Y12, Y10, Y6;        \
	VFMADD231PS  Y12, Y11, Y7;        \
	ADDQ         $8, AX;              \
	SUBQ         gs+56(FP), R10;      \
	JNZ          grp;                 \
	MOVQ         lanes+72(FP), R13;   \
	MOVQ         R9, AX;              \
	MOVQ         R8, R10;             \
	LEAQ         (R12)(R12*2), SI;    \
bias:                                 \
	VMOVUPS      (AX), Y12;           \
	VFMADD231PS  (R10), Y12, Y4;      \
	VFMADD231PS  (R10)(R12*1), Y12, Y5; \
	VFMADD231PS  (R10)(R12*2), Y12, Y6; \
	VFMADD231PS  (R10)(SI*1), Y12, Y7; \
	ADDQ         $32, AX;             \
	ADDQ         $32, R10;            \
	SUBQ         $8, R13;             \
	JNZ          bias;                \
	VMOVUPS      Y4, (DI);            \
	VMOVUPS      Y5, 1024(DI);        \
	VMOVUPS      Y6, 2048(DI);        \
	VMOVUPS      Y7, 3072(DI);        \
	ADDQ         $32, DI;             \
	ADDQ         R12, R9;             \
	DECQ         CX;                  \
	JNZ          tok;                 \
	MOVQ         red+88(FP), AX;      \
	MOVQ         sc+0(FP), BX;        \
	MOVQ         $4, R10;             \
redhead:                              \
	MOVQ         nb+80(FP), CX;       \
	MOVQ         AX, DI;              \
	MOVQ         BX, SI;              \
redgrp:                               \
	REDUCE8(DI, SI);                  \
	ADDQ         $256, DI;            \
	ADDQ         $32, SI;             \
	SUBQ         $8, CX;              \
	JG           redgrp;              \
	ADDQ         $1024, AX;           \
	ADDQ         $128, BX;            \
	DECQ         R10;                 \
	JNZ          redhead;             \
	VZEROUPPER;                       \
	RET

// FLOATSCORES4 is FLOATSCORES for exactly 4 heads.
#define FLOATSCORES4(LOAD4, LOAD1, s32, s8) \
	MOVQ        sc+0(FP), DI;       \
	MOVQ        k+16(FP), BX;       \
	MOVQ        d+32(FP), DX;       \
	SHLQ        $2, DX;             \
	LEAQ        (DX)(DX*2), R11;    \
	MOVQ        nb+40(FP), CX;      \
ftok:                               \
	VXORPS      Y4, Y4, Y4;         \
	VXORPS      Y5, Y5, Y5;         \
	VXORPS      Y6, Y6, Y6;         \
	VXORPS      Y7, Y7, Y7;         \
	MOVQ        q+8(FP), SI;        \
	MOVQ        d+32(FP), R10;      \
f32c:                               \
	CMPQ        R10, $32;           \
	JB          f8c;                \
	LOAD4;                          \
	FMA4((SI), 32(SI), 64(SI), 96(SI), Y4); \
	FMA4((SI)(DX*1), 32(SI)(DX*1), 64(SI)(DX*1), 96(SI)(DX*1), Y5); \
	FMA4((SI)(DX*2), 32(SI)(DX*2), 64(SI)(DX*2), 96(SI)(DX*2), Y6); \
	FMA4((SI)(R11*1), 32(SI)(R11*1), 64(SI)(R11*1), 96(SI)(R11*1), Y7); \
	ADDQ        $s32, BX;           \
	ADDQ        $128, SI;           \
	SUBQ        $32, R10;           \
	JMP         f32c;               \
f8c:                                \
	TESTQ       R10, R10;           \
	JEQ         fred;               \
	LOAD1;                          \
	VFMADD231PS (SI), Y0, Y4;       \
	VFMADD231PS (SI)(DX*1), Y0, Y5; \
	VFMADD231PS (SI)(DX*2), Y0, Y6; \
	VFMADD231PS (SI)(R11*1), Y0, Y7; \
	ADDQ        $s8, BX;            \
	ADDQ        $32, SI;            \
	SUBQ        $8, R10;            \
	JMP         f8c;                \
fred:                               \
	HSUM4STORE4;                    \
	ADDQ        $4, DI;             \
	DECQ        CX;                 \
	JNZ         ftok;               \
	VZEROUPPER;                     \
	RET

#define F16LOAD4 \
	VCVTPH2PS (BX), Y0;   \
	VCVTPH2PS 16(BX), Y1; \
	VCVTPH2PS 32(BX), Y2; \
	VCVTPH2PS 48(BX), Y3

#define F16LOAD1 VCVTPH2PS (BX), Y0

#define F32LOAD4 \
	VMOVUPS (BX), Y0;   \
	VMOVUPS 32(BX), Y1; \
	VMOVUPS 64(BX), Y2; \
	VMOVUPS 96(BX), Y3

#define F32LOAD1 VMOVUPS (BX), Y0

// EXP2 sets Y3 = 2^Y0 for lanes >= -125, 0 for the rest (and NaN), using
// Y1, Y2; Y8..Y13 hold the polynomial, Y14 one, Y15 -125.
#define EXP2 \
	VCMPPS      $0x0d, Y15, Y0, Y1; \
	VROUNDPS    $0, Y0, Y2;         \
	VSUBPS      Y2, Y0, Y0;         \
	VCVTPS2DQ   Y2, Y2;             \
	VPSLLD      $23, Y2, Y2;        \
	VMOVAPS     Y8, Y3;             \
	VFMADD213PS Y9, Y0, Y3;         \
	VFMADD213PS Y10, Y0, Y3;        \
	VFMADD213PS Y11, Y0, Y3;        \
	VFMADD213PS Y12, Y0, Y3;        \
	VFMADD213PS Y13, Y0, Y3;        \
	VFMADD213PS Y14, Y0, Y3;        \
	VPADDD      Y2, Y3, Y3;         \
	VANDPS      Y1, Y3, Y3

#define BCASTCONST(bits, Y) \
	MOVL         $bits, AX; \
	VMOVD        AX, X0;    \
	VBROADCASTSS X0, Y

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (a, d uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, a+0(FP)
	MOVL DX, d+4(FP)
	RET

// func metaF32AVX(dst *float32, src *uint16, nb, pairs2, ms int)
// Converts nb rows of pairs2 halves (2, 4 or a multiple of 8) into rows of
// ms floats; rows shorter than 8 are zero padded to 8.
TEXT ·metaF32AVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ pairs2+24(FP), DX
	MOVQ ms+32(FP), R8
	SHLQ $2, R8
	MOVQ DX, R9
	SHLQ $1, R9
	TESTQ CX, CX
	JEQ  metadone
	CMPQ DX, $8
	JAE  metawide
	CMPQ DX, $4
	JEQ  metafour

metatwo:
	VMOVD     (SI), X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      R9, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       metatwo
	JMP       metadone

metafour:
	VMOVQ     (SI), X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      R9, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       metafour
	JMP       metadone

metawide:
	XORQ AX, AX
	XORQ BX, BX

metawideloop:
	VCVTPH2PS (SI)(AX*1), Y0
	VMOVUPS   Y0, (DI)(BX*1)
	ADDQ      $16, AX
	ADDQ      $32, BX
	CMPQ      AX, R9
	JB        metawideloop
	ADDQ      R9, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       metawide

metadone:
	VZEROUPPER
	RET

// func q4ScoresAVX2(sc, q, qsI *float32, codes *uint32, meta *float32, hn, d, gs, ms, lanes, nb int)
TEXT ·q4ScoresAVX2(SB), NOSPLIT, $0-88
	CODESCORES(Q4UNPACK, 16)

// func q8ScoresAVX2(sc, q, qsI *float32, codes *uint8, meta *float32, hn, d, gs, ms, lanes, nb int)
TEXT ·q8ScoresAVX2(SB), NOSPLIT, $0-88
	CODESCORES(Q8UNPACK, 32)

// func q4Scores4AVX2(sc, q, qsI *float32, codes *uint32, meta *float32, hn, d, gs, ms, lanes, nb int, red *float32)
// q4ScoresAVX2 for hn = 4; red is scratch for 4×32×8 floats.
TEXT ·q4Scores4AVX2(SB), NOSPLIT, $0-96
	CODESCORES4(Q4UNPACK, 16)

// func q8Scores4AVX2(sc, q, qsI *float32, codes *uint8, meta *float32, hn, d, gs, ms, lanes, nb int, red *float32)
TEXT ·q8Scores4AVX2(SB), NOSPLIT, $0-96
	CODESCORES4(Q8UNPACK, 32)

// func q4UnpackAVX2(dst *float32, codes *uint32, chunks int)
// Widens chunks×16 code bytes to chunks×32 floats in lane order.
TEXT ·q4UnpackAVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         codes+8(FP), BX
	MOVQ         chunks+16(FP), CX
	MOVL         $15, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

	TESTQ $1, CX
	JEQ   q4unpackpair
	Q4UNPACK
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $16, BX
	ADDQ    $128, DI
	DECQ    CX
	JEQ     q4unpackdone

q4unpackpair: // two chunks per iteration
	Q4UNPACK
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $16, BX
	Q4UNPACK
	VMOVUPS Y0, 128(DI)
	VMOVUPS Y1, 160(DI)
	VMOVUPS Y2, 192(DI)
	VMOVUPS Y3, 224(DI)
	ADDQ    $16, BX
	ADDQ    $256, DI
	SUBQ    $2, CX
	JNZ     q4unpackpair

q4unpackdone:
	VZEROUPPER
	RET

// func q8UnpackAVX2(dst *float32, codes *uint8, chunks int)
TEXT ·q8UnpackAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), BX
	MOVQ chunks+16(FP), CX

q8unpackloop:
	Q8UNPACK
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $32, BX
	ADDQ    $128, DI
	DECQ    CX
	JNZ     q8unpackloop
	VZEROUPPER
	RET

// func f16ToF32AVX(dst *float32, src *uint16, pieces int)
// Converts pieces×8 halves.
TEXT ·f16ToF32AVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ pieces+16(FP), CX

f16cvt4: // four pieces per iteration
	CMPQ      CX, $4
	JB        f16cvt1
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $4, CX
	JMP       f16cvt4

f16cvt1:
	TESTQ     CX, CX
	JEQ       f16cvtdone
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JMP       f16cvt1

f16cvtdone:
	VZEROUPPER
	RET

// func f16ScoresAVX2(sc, q *float32, k *uint16, hn, d, nb int)
TEXT ·f16ScoresAVX2(SB), NOSPLIT, $0-48
	FLOATSCORES(F16LOAD4, F16LOAD1, 64, 16)

// func f32ScoresAVX2(sc, q *float32, k *float32, hn, d, nb int)
TEXT ·f32ScoresAVX2(SB), NOSPLIT, $0-48
	FLOATSCORES(F32LOAD4, F32LOAD1, 128, 32)

// func f16Scores4AVX2(sc, q *float32, k *uint16, hn, d, nb int)
// f16ScoresAVX2 for hn = 4.
TEXT ·f16Scores4AVX2(SB), NOSPLIT, $0-48
	FLOATSCORES4(F16LOAD4, F16LOAD1, 64, 16)

// func f32Scores4AVX2(sc, q *float32, k *float32, hn, d, nb int)
TEXT ·f32Scores4AVX2(SB), NOSPLIT, $0-48
	FLOATSCORES4(F32LOAD4, F32LOAD1, 128, 32)

// func codeWAVX2(w, p, meta *float32, hn, ms, lanes, nb int)
// The V weights of up to 4 heads: W_j[t] = p_j[t]·meta[t] (p·scale at even
// lanes, p·bias at odd) for the nb tokens, and their sums B_j = Σ_t W_j[t]
// in row 32. W_j are 33·ms floats apart, p_j 32; lanes is 8 or 16.
TEXT ·codeWAVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ meta+16(FP), R8
	MOVQ ms+32(FP), R12
	SHLQ $2, R12                 // row bytes
	MOVQ R12, R10
	SHLQ $5, R10
	ADDQ R12, R10                // head stride bytes (33 rows)
	LEAQ (R10)(R10*2), R11
	MOVQ nb+48(FP), CX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	CMPQ hn+24(FP), $4
	JNE  cw1

cw4: // four heads per token
	VMOVUPS      (R8), Y0
	VBROADCASTSS (SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, (DI)
	VADDPS       Y13, Y4, Y4
	VBROADCASTSS 128(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, (DI)(R10*1)
	VADDPS       Y13, Y5, Y5
	VBROADCASTSS 256(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, (DI)(R10*2)
	VADDPS       Y13, Y6, Y6
	VBROADCASTSS 384(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, (DI)(R11*1)
	VADDPS       Y13, Y7, Y7
	CMPQ         lanes+40(FP), $16
	JNE          cw4next
	VMOVUPS      32(R8), Y0
	VBROADCASTSS (SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, 32(DI)
	VADDPS       Y13, Y8, Y8
	VBROADCASTSS 128(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, 32(DI)(R10*1)
	VADDPS       Y13, Y9, Y9
	VBROADCASTSS 256(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, 32(DI)(R10*2)
	VADDPS       Y13, Y10, Y10
	VBROADCASTSS 384(SI), Y12
	VMULPS       Y0, Y12, Y13
	VMOVUPS      Y13, 32(DI)(R11*1)
	VADDPS       Y13, Y11, Y11

cw4next:
	ADDQ R12, R8
	ADDQ $4, SI
	ADDQ R12, DI
	DECQ CX
	JNZ  cw4
	// DI is now row nb of head 0; B goes to row 32.
	MOVQ nb+48(FP), AX
	NEGQ AX
	ADDQ $32, AX
	IMULQ R12, AX
	ADDQ AX, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, (DI)(R10*1)
	VMOVUPS Y6, (DI)(R10*2)
	VMOVUPS Y7, (DI)(R11*1)
	CMPQ lanes+40(FP), $16
	JNE  cwdone
	VMOVUPS Y8, 32(DI)
	VMOVUPS Y9, 32(DI)(R10*1)
	VMOVUPS Y10, 32(DI)(R10*2)
	VMOVUPS Y11, 32(DI)(R11*1)
	JMP  cwdone

cw1: // one head at a time
	MOVQ   nb+48(FP), CX
	MOVQ   meta+16(FP), R8
	MOVQ   DI, BX
	VXORPS Y4, Y4, Y4
	VXORPS Y8, Y8, Y8

cw1tok:
	VBROADCASTSS (SI), Y12
	VMULPS       (R8), Y12, Y13
	VMOVUPS      Y13, (BX)
	VADDPS       Y13, Y4, Y4
	CMPQ         lanes+40(FP), $16
	JNE          cw1next
	VMULPS       32(R8), Y12, Y13
	VMOVUPS      Y13, 32(BX)
	VADDPS       Y13, Y8, Y8

cw1next:
	ADDQ R12, R8
	ADDQ $4, SI
	ADDQ R12, BX
	DECQ CX
	JNZ  cw1tok
	MOVQ R12, AX
	SHLQ $5, AX
	VMOVUPS Y4, (DI)(AX*1)
	CMPQ lanes+40(FP), $16
	JNE  cw1head
	VMOVUPS Y8, 32(DI)(AX*1)

cw1head:
	MOVQ nb+48(FP), AX
	SHLQ $2, AX
	SUBQ AX, SI
	ADDQ $128, SI            // next head's probabilities
	ADDQ R10, DI
	DECQ hn+24(FP)
	JNZ  cw1

cwdone:
	VZEROUPPER
	RET

// func codeAccVAVX2(o, nf, wbuf *float32, heads, d, gsLog, ms, nb int)
// For each head (o rows of d, W tables from codeWAVX2 33·ms floats apart):
// per group o += B_bias, then o += Σ_t W[t].scale_g · nf[t] (the block's
// codes as floats, rows of d). Heads go in pairs over 32-element sets so
// each load of nf feeds two heads.
TEXT ·codeAccVAVX2(SB), NOSPLIT, $0-64
	MOVQ o+0(FP), DI
	MOVQ nf+8(FP), R10
	MOVQ wbuf+16(FP), R9
	MOVQ ms+48(FP), R12
	SHLQ $2, R12              // W row bytes
	MOVQ R12, R8
	SHLQ $5, R8
	ADDQ R12, R8              // W head stride bytes (33 rows)
	MOVQ d+32(FP), R13
	SHLQ $2, R13              // o and nf row bytes

cahead:
	CMPQ heads+24(FP), $2
	JB   casingle
	XORQ R11, R11             // element offset of the set

capair:
	CMPQ R11, d+32(FP)
	JAE  capairdone
	MOVQ gsLog+40(FP), CX
	MOVQ R11, BX
	SHRQ CX, BX
	SHLQ $3, BX
	ADDQ R9, BX               // &W_j[0][2·group]
	LEAQ (BX)(R8*1), DX       // &W_j+1[0][2·group]
	LEAQ (DI)(R11*4), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	VMOVUPS (AX)(R13*1), Y4
	VMOVUPS 32(AX)(R13*1), Y5
	VMOVUPS 64(AX)(R13*1), Y6
	VMOVUPS 96(AX)(R13*1), Y7
	MOVQ R12, CX
	SHLQ $5, CX
	VBROADCASTSS 4(BX)(CX*1), Y12 // bias sums, row 32
	VBROADCASTSS 4(DX)(CX*1), Y13
	VADDPS Y12, Y0, Y0
	VADDPS Y12, Y1, Y1
	VADDPS Y12, Y2, Y2
	VADDPS Y12, Y3, Y3
	VADDPS Y13, Y4, Y4
	VADDPS Y13, Y5, Y5
	VADDPS Y13, Y6, Y6
	VADDPS Y13, Y7, Y7
	LEAQ (R10)(R11*4), AX
	MOVQ nb+56(FP), CX

capairtok:
	VMOVUPS      (AX), Y8
	VMOVUPS      32(AX), Y9
	VMOVUPS      64(AX), Y10
	VMOVUPS      96(AX), Y11
	VBROADCASTSS (BX), Y12
	VBROADCASTSS (DX), Y13
	VFMADD231PS  Y12, Y8, Y0
	VFMADD231PS  Y12, Y9, Y1
	VFMADD231PS  Y12, Y10, Y2
	VFMADD231PS  Y12, Y11, Y3
	VFMADD231PS  Y13, Y8, Y4
	VFMADD231PS  Y13, Y9, Y5
	VFMADD231PS  Y13, Y10, Y6
	VFMADD231PS  Y13, Y11, Y7
	ADDQ         R13, AX
	ADDQ         R12, BX
	ADDQ         R12, DX
	DECQ         CX
	JNZ          capairtok
	LEAQ (DI)(R11*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, 64(AX)
	VMOVUPS Y3, 96(AX)
	VMOVUPS Y4, (AX)(R13*1)
	VMOVUPS Y5, 32(AX)(R13*1)
	VMOVUPS Y6, 64(AX)(R13*1)
	VMOVUPS Y7, 96(AX)(R13*1)
	ADDQ $32, R11
	JMP  capair

capairdone:
	LEAQ (DI)(R13*2), DI
	LEAQ (R9)(R8*2), R9
	SUBQ $2, heads+24(FP)
	JNZ  cahead
	JMP  cadone

casingle: // the last head of an odd count
	XORQ R11, R11

casingleset:
	CMPQ R11, d+32(FP)
	JAE  cadone
	MOVQ gsLog+40(FP), CX
	MOVQ R11, BX
	SHRQ CX, BX
	SHLQ $3, BX
	ADDQ R9, BX
	LEAQ (DI)(R11*4), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	MOVQ R12, CX
	SHLQ $5, CX
	VBROADCASTSS 4(BX)(CX*1), Y12
	VADDPS Y12, Y0, Y0
	VADDPS Y12, Y1, Y1
	VADDPS Y12, Y2, Y2
	VADDPS Y12, Y3, Y3
	LEAQ (R10)(R11*4), AX
	MOVQ nb+56(FP), CX

casingletok:
	VBROADCASTSS (BX), Y12
	VFMADD231PS  (AX), Y12, Y0
	VFMADD231PS  32(AX), Y12, Y1
	VFMADD231PS  64(AX), Y12, Y2
	VFMADD231PS  96(AX), Y12, Y3
	ADDQ         R13, AX
	ADDQ         R12, BX
	DECQ         CX
	JNZ          casingletok
	LEAQ (DI)(R11*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, 64(AX)
	VMOVUPS Y3, 96(AX)
	ADDQ $32, R11
	JMP  casingleset

cadone:
	VZEROUPPER
	RET

// func floatAccVAVX2(o, p, vf *float32, heads, d, nb, vstride int)
// For each head: o += Σ_t p_t·vf[t] (rows vstride floats apart, p rows of
// 32). Heads go in pairs over 32-element sets (8-element pieces for the
// tail of d) so each load of vf feeds two heads.
TEXT ·floatAccVAVX2(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ vf+16(FP), R10
	MOVQ d+32(FP), R13
	SHLQ $2, R13              // o row bytes
	MOVQ vstride+48(FP), R12
	SHLQ $2, R12              // vf row bytes

fahead:
	CMPQ heads+24(FP), $2
	JB   fasingle
	XORQ R11, R11

fapair:
	MOVQ d+32(FP), AX
	SUBQ R11, AX
	CMPQ AX, $32
	JB   fapairpiece
	LEAQ (DI)(R11*4), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	VMOVUPS (AX)(R13*1), Y4
	VMOVUPS 32(AX)(R13*1), Y5
	VMOVUPS 64(AX)(R13*1), Y6
	VMOVUPS 96(AX)(R13*1), Y7
	LEAQ (R10)(R11*4), AX
	MOVQ SI, BX
	MOVQ nb+40(FP), CX

fapairtok:
	VMOVUPS      (AX), Y8
	VMOVUPS      32(AX), Y9
	VMOVUPS      64(AX), Y10
	VMOVUPS      96(AX), Y11
	VBROADCASTSS (BX), Y12
	VBROADCASTSS 128(BX), Y13
	VFMADD231PS  Y12, Y8, Y0
	VFMADD231PS  Y12, Y9, Y1
	VFMADD231PS  Y12, Y10, Y2
	VFMADD231PS  Y12, Y11, Y3
	VFMADD231PS  Y13, Y8, Y4
	VFMADD231PS  Y13, Y9, Y5
	VFMADD231PS  Y13, Y10, Y6
	VFMADD231PS  Y13, Y11, Y7
	ADDQ         R12, AX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          fapairtok
	LEAQ (DI)(R11*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, 64(AX)
	VMOVUPS Y3, 96(AX)
	VMOVUPS Y4, (AX)(R13*1)
	VMOVUPS Y5, 32(AX)(R13*1)
	VMOVUPS Y6, 64(AX)(R13*1)
	VMOVUPS Y7, 96(AX)(R13*1)
	ADDQ $32, R11
	JMP  fapair

fapairpiece: // 8 elements of both heads
	TESTQ AX, AX
	JEQ   fapairdone
	LEAQ (DI)(R11*4), DX
	VMOVUPS (DX), Y0
	VMOVUPS (DX)(R13*1), Y4
	LEAQ (R10)(R11*4), AX
	MOVQ SI, BX
	MOVQ nb+40(FP), CX

fapairpiecetok:
	VMOVUPS      (AX), Y8
	VBROADCASTSS (BX), Y12
	VBROADCASTSS 128(BX), Y13
	VFMADD231PS  Y12, Y8, Y0
	VFMADD231PS  Y13, Y8, Y4
	ADDQ         R12, AX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          fapairpiecetok
	VMOVUPS Y0, (DX)
	VMOVUPS Y4, (DX)(R13*1)
	ADDQ $8, R11
	JMP  fapair

fapairdone:
	LEAQ (DI)(R13*2), DI
	ADDQ $256, SI
	SUBQ $2, heads+24(FP)
	JNZ  fahead
	JMP  fadone

fasingle: // the last head of an odd count, 8 elements at a time
	XORQ R11, R11

fasinglepiece:
	CMPQ R11, d+32(FP)
	JAE  fadone
	LEAQ (DI)(R11*4), DX
	VMOVUPS (DX), Y0
	LEAQ (R10)(R11*4), AX
	MOVQ SI, BX
	MOVQ nb+40(FP), CX

fasingletok:
	VBROADCASTSS (BX), Y12
	VFMADD231PS  (AX), Y12, Y0
	ADDQ         R12, AX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          fasingletok
	VMOVUPS Y0, (DX)
	ADDQ $8, R11
	JMP  fasinglepiece

fadone:
	VZEROUPPER
	RET

// func softmaxAVX2(sc, ml, o *float32, heads, d int)
// For each head: 32 scores (pad with -Inf) become 2^(s - m'), m' the new
// running max; l = l·2^(m - m') + Σ; o *= 2^(m - m') when that is not 1.
TEXT ·softmaxAVX2(SB), NOSPLIT, $0-40
	BCASTCONST(0x3920fdde, Y8)  // 1.535336188319500e-4
	BCASTCONST(0x3aaf9f29, Y9)  // 1.339887440266574e-3
	BCASTCONST(0x3c1d96a6, Y10) // 9.618437357674640e-3
	BCASTCONST(0x3d635774, Y11) // 5.550332471162809e-2
	BCASTCONST(0x3e75fdee, Y12) // 2.402264791363012e-1
	BCASTCONST(0x3f317218, Y13) // 6.931472028550421e-1
	BCASTCONST(0x3f800000, Y14) // 1
	BCASTCONST(0xc2fa0000, Y15) // -125
	MOVQ sc+0(FP), DI
	MOVQ ml+8(FP), SI
	MOVQ o+16(FP), R8
	MOVQ d+32(FP), R13
	SHLQ $2, R13

smhead:
	VMOVUPS      (DI), Y4
	VMAXPS       32(DI), Y4, Y4
	VMAXPS       64(DI), Y4, Y4
	VMAXPS       96(DI), Y4, Y4
	VPERM2F128   $1, Y4, Y4, Y5
	VMAXPS       Y5, Y4, Y4
	VPERMILPS    $0x4e, Y4, Y5
	VMAXPS       Y5, Y4, Y4
	VPERMILPS    $0xb1, Y4, Y5
	VMAXPS       Y5, Y4, Y4      // block max in every lane
	VBROADCASTSS (SI), Y5        // m
	VMAXPS       Y5, Y4, Y7      // m' = max(block max, m); m if the block is all NaN
	VXORPS       Y6, Y6, Y6      // Σ p
	XORQ         CX, CX

smexp:
	VMOVUPS (DI)(CX*1), Y0
	VSUBPS  Y7, Y0, Y0
	EXP2
	VMOVUPS Y3, (DI)(CX*1)
	VADDPS  Y3, Y6, Y6
	ADDQ    $32, CX
	CMPQ    CX, $128
	JB      smexp
	VSUBPS  Y7, Y5, Y0           // m - m'
	EXP2                         // alpha in every lane
	VEXTRACTF128 $1, Y6, X0
	VADDPS       X0, X6, X6
	VHADDPS      X6, X6, X6
	VHADDPS      X6, X6, X6
	VMOVSS       4(SI), X0
	VFMADD213SS  X6, X3, X0      // l·alpha + Σ
	VMOVSS       X0, 4(SI)
	VMOVSS       X7, (SI)
	VUCOMISS     X14, X3
	JEQ          smnext
	MOVQ         R8, AX
	MOVQ         R13, CX

smscale:
	VMULPS  (AX), Y3, Y0
	VMOVUPS Y0, (AX)
	ADDQ    $32, AX
	SUBQ    $32, CX
	JNZ     smscale

smnext:
	ADDQ $128, DI
	ADDQ $8, SI
	ADDQ R13, R8
	DECQ heads+24(FP)
	JNZ  smhead
	VZEROUPPER
	RET

// func dotAVX2(a, b *float32, n int) float32
// n a multiple of 8.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ        CX, $32
	JB          dot8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dot32

dot8:
	TESTQ       CX, CX
	JEQ         dotred
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dotred:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyAVX2(y *float32, a float32, x *float32, n int)
// y += a·x, n a multiple of 8.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	VBROADCASTSS a+8(FP), Y8
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX

axpy32:
	CMPQ        CX, $32
	JB          axpy8
	VMOVUPS     (DI), Y0
	VMOVUPS     32(DI), Y1
	VMOVUPS     64(DI), Y2
	VMOVUPS     96(DI), Y3
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS 32(SI), Y8, Y1
	VFMADD231PS 64(SI), Y8, Y2
	VFMADD231PS 96(SI), Y8, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	VMOVUPS     Y2, 64(DI)
	VMOVUPS     Y3, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy32

axpy8:
	TESTQ       CX, CX
	JEQ         axpydone
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y8, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy8

axpydone:
	VZEROUPPER
	RET

// func q4AccV4AVX2(o *float32, codes *uint32, wbuf *float32, quads, d, gsLog, ms, nb int)
// codeAccVAVX2 for quads×4 heads straight from the q4 codes (rows of d/2
// bytes): per 16-element half set the 4 heads' accumulators (8 vectors)
// stay in registers while each token's 8 code bytes are widened once and
// feed all 4 heads. Same operations in the same order per element as
// q4UnpackAVX2 + codeAccVAVX2, so the results are identical.
TEXT ·q4AccV4AVX2(SB), NOSPLIT, $0-64
	MOVL         $15, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVQ o+0(FP), DI
	MOVQ wbuf+16(FP), R9
	MOVQ ms+48(FP), R12
	SHLQ $2, R12              // W row bytes
	MOVQ R12, R8
	SHLQ $5, R8
	ADDQ R12, R8              // W head stride bytes (33 rows)
	LEAQ (R8)(R8*2), R11      // 3 W head strides
	MOVQ d+32(FP), R13
	SHLQ $2, R13              // o row bytes
	LEAQ (R13)(R13*2), R14    // 3 o rows
	MOVQ d+32(FP), SI
	SHRQ $1, SI               // code row bytes

vqquad:
	XORQ R10, R10             // element offset of the half set

vqhalf:
	CMPQ R10, d+32(FP)
	JAE  vqquaddone
	MOVQ gsLog+40(FP), CX
	MOVQ R10, BX
	SHRQ CX, BX
	SHLQ $3, BX
	ADDQ R9, BX               // &W_0[0][2·group]
	LEAQ (DI)(R10*4), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS (AX)(R13*1), Y2
	VMOVUPS 32(AX)(R13*1), Y3
	VMOVUPS (AX)(R13*2), Y4
	VMOVUPS 32(AX)(R13*2), Y5
	VMOVUPS (AX)(R14*1), Y6
	VMOVUPS 32(AX)(R14*1), Y7
	MOVQ R12, CX
	SHLQ $5, CX
	ADDQ BX, CX               // row 32: the bias sums
	VBROADCASTSS 4(CX), Y10
	VBROADCASTSS 4(CX)(R8*1), Y11
	VBROADCASTSS 4(CX)(R8*2), Y12
	VBROADCASTSS 4(CX)(R11*1), Y13
	VADDPS Y10, Y0, Y0
	VADDPS Y10, Y1, Y1
	VADDPS Y11, Y2, Y2
	VADDPS Y11, Y3, Y3
	VADDPS Y12, Y4, Y4
	VADDPS Y12, Y5, Y5
	VADDPS Y13, Y6, Y6
	VADDPS Y13, Y7, Y7
	MOVQ codes+8(FP), AX
	MOVQ R10, CX
	SHRQ $1, CX
	ADDQ CX, AX               // this half set's 8 code bytes of token 0
	MOVQ nb+56(FP), CX

vqtok:
	VPMOVZXBD    (AX), Y8
	VPSRLD       $4, Y8, Y9
	VPAND        Y15, Y8, Y8
	VCVTDQ2PS    Y8, Y8
	VCVTDQ2PS    Y9, Y9
	VBROADCASTSS (BX), Y10
	VBROADCASTSS (BX)(R8*1), Y11
	VBROADCASTSS (BX)(R8*2), Y12
	VBROADCASTSS (BX)(R11*1), Y13
	VFMADD231PS  Y10, Y8, Y0
	VFMADD231PS  Y10, Y9, Y1
	VFMADD231PS  Y11, Y8, Y2
	VFMADD231PS  Y11, Y9, Y3
	VFMADD231PS  Y12, Y8, Y4
	VFMADD231PS  Y12, Y9, Y5
	VFMADD231PS  Y13, Y8, Y6
	VFMADD231PS  Y13, Y9, Y7
	ADDQ         SI, AX
	ADDQ         R12, BX
	DECQ         CX
	JNZ          vqtok
	LEAQ (DI)(R10*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, (AX)(R13*1)
	VMOVUPS Y3, 32(AX)(R13*1)
	VMOVUPS Y4, (AX)(R13*2)
	VMOVUPS Y5, 32(AX)(R13*2)
	VMOVUPS Y6, (AX)(R14*1)
	VMOVUPS Y7, 32(AX)(R14*1)
	ADDQ $16, R10
	JMP  vqhalf

vqquaddone:
	LEAQ (DI)(R13*4), DI
	LEAQ (R9)(R8*4), R9
	DECQ quads+24(FP)
	JNZ  vqquad
	VZEROUPPER
	RET

