//go:build amd64

#include "textflag.h"

// func swiGLUAVX2(dst, gate, up *float32, n int, c *[16]float32)
// dst[i] = fastmath.SiLU(gate[i])·up[i], 8 at a time, n a multiple of 8:
// the same float32 operations in the same order as the Go code (which
// amd64 does not fuse into FMA), so the same bits. c holds -log2e, -125,
// 127, 0.5, the polynomial's c6..c1, and 1.
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), AX
	VBROADCASTSS (AX), Y15     // -log2e
	VBROADCASTSS 4(AX), Y14    // -125
	VBROADCASTSS 8(AX), Y13    // 127
	VBROADCASTSS 12(AX), Y12   // 0.5
	VBROADCASTSS 40(AX), Y11   // 1
	SHRQ $3, CX
	JZ   done

loop:
	VMOVUPS (SI), Y0           // x
	VMULPS Y15, Y0, Y1         // y = (-x)·log2e
	VCMPPS $0x1D, Y14, Y1, Y2  // y >= -125 (ordered: false for NaN)
	VMINPS Y13, Y1, Y1         // min(y, 127)
	VADDPS Y12, Y1, Y3         // t = y + 0.5
	VCVTTPS2DQ Y3, Y4          // i = int32(t)
	VCVTDQ2PS Y4, Y5
	VCMPPS $0x1E, Y3, Y5, Y6   // float(i) > t
	VPADDD Y6, Y4, Y4          // i-- there
	VCVTDQ2PS Y4, Y5
	VSUBPS Y5, Y1, Y1          // f = y - float(i)
	VBROADCASTSS 16(AX), Y7    // c6
	VMULPS Y1, Y7, Y7
	VBROADCASTSS 20(AX), Y8
	VADDPS Y8, Y7, Y7
	VMULPS Y1, Y7, Y7
	VBROADCASTSS 24(AX), Y8
	VADDPS Y8, Y7, Y7
	VMULPS Y1, Y7, Y7
	VBROADCASTSS 28(AX), Y8
	VADDPS Y8, Y7, Y7
	VMULPS Y1, Y7, Y7
	VBROADCASTSS 32(AX), Y8
	VADDPS Y8, Y7, Y7
	VMULPS Y1, Y7, Y7
	VBROADCASTSS 36(AX), Y8    // c1
	VADDPS Y8, Y7, Y7
	VMULPS Y1, Y7, Y7
	VADDPS Y11, Y7, Y7         // p
	VPSLLD $23, Y4, Y4
	VPADDD Y4, Y7, Y7          // 2^y
	VANDPS Y2, Y7, Y7          // 0 where !(y >= -125)
	VADDPS Y11, Y7, Y7         // 1 + 2^y
	VDIVPS Y7, Y0, Y0          // x / (1 + 2^y)
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
