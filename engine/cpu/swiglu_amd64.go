package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func swiGLUAVX2(dst, gate, up *float32, n int, c *[16]float32)

// swiGLUConsts are the constants of fastmath.SiLU and Exp2 as float32, in
// the order swiGLUAVX2 reads them.
var swiGLUConsts = [16]float32{
	-float32(1.4426950408889634), -125, 127, 0.5,
	1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
	5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1,
	1,
}

var hasSwiGLUAVX2 = cpu.X86.HasAVX2

// swiGLU is swiGLUGo, 8 elements at a time in assembly where AVX2 is
// there (the same bits).
func swiGLU(dst, gate, up []float32) {
	n8 := len(dst) &^ 7
	if hasSwiGLUAVX2 && n8 > 0 {
		_, _ = gate[n8-1], up[n8-1]
		swiGLUAVX2(&dst[0], &gate[0], &up[0], n8, &swiGLUConsts)
	} else {
		n8 = 0
	}
	swiGLUGo(dst[n8:], gate[n8:len(dst)], up[n8:len(dst)])
}
