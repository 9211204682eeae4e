package cpu

import (
	"math"

	"nibble/engine/backend"
	"nibble/engine/fastmath"
)

// The ops of the newer model families (Gemma's GELU-tanh GLU, embedding
// scale and logit soft-capping).

func (b *Backend) GeluGLU(dst, gate, up backend.Tensor, n int) {
	d, g, u := f(dst), f(gate), f(up)
	b.pool.For(n, 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = fastmath.GeluTanh(g[i]) * u[i]
		}
	})
}

func (b *Backend) Scale(x backend.Tensor, s float32, n int) {
	d := f(x)[:n]
	for i := range d {
		d[i] *= s
	}
}

func (b *Backend) Softcap(x backend.Tensor, c float32, n int) {
	d := f(x)[:n]
	b.pool.For(n, 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = Softcap(d[i], c)
		}
	})
}

// Softcap is c·tanh(x/c), in float64 so that the cap costs no precision.
func Softcap(x, c float32) float32 {
	return float32(float64(c) * math.Tanh(float64(x)/float64(c)))
}
