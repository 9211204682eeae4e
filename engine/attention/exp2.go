package attention

import "math"

// exp2 is a fast float32 2^x (Cephes' minimax polynomial on [-0.5, 0.5],
// about 2 ulp): the softmax calls it once per token per query head, and
// math.Exp2 in float64 would cost more than the K/V arithmetic. Arguments
// below -125 (including -Inf, the empty running max) give 0.
func exp2(x float32) float32 {
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
