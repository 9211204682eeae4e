// Package fastmath has float32 approximations of transcendental functions
// for hot loops, accurate to a few ulp, where float64 math.Exp would cost
// more than the arithmetic around it.
package fastmath

import "math"

const log2e = 1.4426950408889634

// Exp2 is 2^x (Cephes' minimax polynomial on [-0.5, 0.5], about 2 ulp).
// Arguments below -125 (including -Inf) give 0; above 127 are clamped.
func Exp2(x float32) float32 {
	if !(x >= -125) {
		return 0
	}
	x = min(x, 127)
	t := x + 0.5
	i := int32(t)
	if float32(i) > t {
		i-- // floor for negative t
	}
	f := x - float32(i)
	p := ((((((1.535336188319500e-4*f+1.339887440266574e-3)*f+9.618437357674640e-3)*f+
		5.550332471162809e-2)*f+2.402264791363012e-1)*f+6.931472028550421e-1)*f + 1)
	return math.Float32frombits(math.Float32bits(p) + uint32(i)<<23)
}

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + Exp2(-x*log2e)) }

// GeluTanh is the tanh approximation of GELU, x/2·(1 + tanh(u)) with
// u = sqrt(2/π)·(x + 0.044715·x³), computed as x·sigmoid(2u).
func GeluTanh(x float32) float32 {
	const k = 2 * 0.7978845608028654 * log2e // 2·sqrt(2/π)·log2(e)
	return x / (1 + Exp2(-k*(x+0.044715*x*x*x)))
}
