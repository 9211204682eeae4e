//go:build amd64

#include "textflag.h"

// Activation quantizers, bit for bit the Go versions in activation.go
// (which transcribe ggml's AVX2 quantize_row_q8_0/q8_1 and
// quantize_row_q8_K_ref): VCVTPS2DQ rounds to nearest even like
// nearest_int, and the saturating packs cap at 127 like MIN(127, v).

DATA q8PackPerm<>+0(SB)/4, $0
DATA q8PackPerm<>+4(SB)/4, $4
DATA q8PackPerm<>+8(SB)/4, $1
DATA q8PackPerm<>+12(SB)/4, $5
DATA q8PackPerm<>+16(SB)/4, $2
DATA q8PackPerm<>+20(SB)/4, $6
DATA q8PackPerm<>+24(SB)/4, $3
DATA q8PackPerm<>+28(SB)/4, $7
GLOBL q8PackPerm<>(SB), RODATA|NOPTR, $32

// Y15 = abs mask, X14 = 127.0, Y13 = pack permutation.
#define QCONSTS \
	MOVL $0x7fffffff, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x42fe0000, AX; \
	VMOVD AX, X14; \
	VMOVDQU q8PackPerm<>(SB), Y13

// Y0..Y3 (32 int32) → 32 int8 at (DI), in order.
#define PACK_STORE \
	VPACKSSDW Y1, Y0, Y4; \
	VPACKSSDW Y3, Y2, Y5; \
	VPACKSSWB Y5, Y4, Y4; \
	VPERMD Y4, Y13, Y4; \
	VMOVDQU Y4, (DI)

// X = horizontal int32 sum of Y (X its low half), T scratch.
#define HSUMD(Y, X, T) \
	VEXTRACTI128 $1, Y, T; \
	VPADDD T, X, X; \
	VPSHUFD $0x4E, X, T; \
	VPADDD T, X, X; \
	VPSHUFD $0xB1, X, T; \
	VPADDD T, X, X

// func quantizeQ8_0AVX2(x *float32, qs *int8, d, s *float32, sum *int32, nb int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ s+24(FP), R9
	MOVQ sum+32(FP), R10
	MOVQ nb+40(FP), CX
	QCONSTS
	TESTQ CX, CX
	JZ    q80qdone

q80qloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VMAXPS Y5, Y4, Y4
	VANDPS Y15, Y2, Y5
	VMAXPS Y5, Y4, Y4
	VANDPS Y15, Y3, Y5
	VMAXPS Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4        // amax
	VDIVSS X14, X4, X6       // d = amax/127
	VDIVSS X4, X14, X7       // 127/amax
	VXORPS X8, X8, X8
	VCMPSS $4, X8, X4, X8    // amax != 0
	VANDPS X8, X7, X7        // id (0 for an all-zero block)
	VBROADCASTSS X7, Y7
	VMULPS Y7, Y0, Y0
	VMULPS Y7, Y1, Y1
	VMULPS Y7, Y2, Y2
	VMULPS Y7, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPADDD Y1, Y0, Y8
	VPADDD Y3, Y2, Y9
	VPADDD Y9, Y8, Y8
	HSUMD(Y8, X8, X9)
	VMOVD X8, (R10)          // Σq
	VCVTDQ2PS X8, X8
	VMULSS X8, X6, X8        // d·Σq (d unrounded)
	VCVTPS2PH $0, X8, X8
	VCVTPH2PS X8, X8
	VMOVSS X8, (R9)          // s
	VCVTPS2PH $0, X6, X6
	VCVTPH2PS X6, X6
	VMOVSS X6, (R8)          // d
	PACK_STORE
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JNZ  q80qloop

q80qdone:
	VZEROUPPER
	RET

// Store the sum of the 16 int32 in Y0, Y1 as int16 at off(R9).
#define BSUM16(YA, YB, off) \
	VPADDD YA, YB, Y4; \
	HSUMD(Y4, X4, X5); \
	VMOVD X4, AX; \
	MOVW AX, off(R9)

// func quantizeQ8KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)
TEXT ·quantizeQ8KAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ bsums+24(FP), R9
	MOVQ nb+32(FP), CX
	QCONSTS
	TESTQ CX, CX
	JZ    q8kdone

q8kblock:
	// amax over the 256 values
	VXORPS Y4, Y4, Y4
	XORQ DX, DX
q8kmax:
	VANDPS (SI)(DX*1), Y15, Y5
	VMAXPS Y5, Y4, Y4
	ADDQ $32, DX
	CMPQ DX, $1024
	JLT  q8kmax
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4        // amax
	VXORPS X5, X5, X5
	VUCOMISS X5, X4
	JNE  q8knonzero
	// all zero: d = 0, qs = 0, bsums = 0
	MOVL $0, (R8)
	VPXOR Y5, Y5, Y5
	XORQ DX, DX
q8kzero:
	VMOVDQU Y5, (DI)(DX*1)
	ADDQ $32, DX
	CMPQ DX, $256
	JLT  q8kzero
	VMOVDQU Y5, (R9)
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $32, R9
	JMP  q8knext

q8knonzero:
	// the first element whose |x| is amax gives the sign
	VBROADCASTSS X4, Y6
	XORQ DX, DX
q8kfind:
	VANDPS (SI)(DX*4), Y15, Y5
	VCMPPS $0, Y6, Y5, Y5
	VMOVMSKPS Y5, AX
	TESTL AX, AX
	JNZ  q8kfound
	ADDQ $8, DX
	CMPQ DX, $256
	JLT  q8kfind
	VMOVAPS X4, X6           // not reached for finite input
	JMP  q8kscale
q8kfound:
	BSFL AX, AX
	ADDQ AX, DX
	VMOVSS (SI)(DX*4), X6    // max, with its sign
q8kscale:
	MOVL $0xc2fe0000, AX     // -127.0
	VMOVD AX, X7
	VDIVSS X6, X7, X7        // iscale = -127/max
	MOVL $0x3f800000, AX
	VMOVD AX, X8
	VDIVSS X7, X8, X8        // d = 1/iscale
	VMOVSS X8, (R8)
	VBROADCASTSS X7, Y7
	XORQ DX, DX
q8kquant:
	VMULPS (SI), Y7, Y0
	VMULPS 32(SI), Y7, Y1
	VMULPS 64(SI), Y7, Y2
	VMULPS 96(SI), Y7, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	PACK_STORE
	// Σ of each 16: recompute from the packed (capped) values
	VPMOVSXBD (DI), Y0
	VPMOVSXBD 8(DI), Y1
	VPMOVSXBD 16(DI), Y2
	VPMOVSXBD 24(DI), Y3
	BSUM16(Y0, Y1, 0)
	BSUM16(Y2, Y3, 2)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, R9
	ADDQ $1, DX
	CMPQ DX, $8
	JLT  q8kquant

q8knext:
	ADDQ $4, R8
	DECQ CX
	JNZ  q8kblock

q8kdone:
	VZEROUPPER
	RET

// func roundF16AVX2(dst, src *float32, n int)
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   rf16done

rf16loop:
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  rf16loop

rf16done:
	VZEROUPPER
	RET
