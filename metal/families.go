package metal

import "nibble/engine/backend"

// The ops of the newer model families (Gemma's GELU-tanh GLU, embedding
// scale and final-logit soft-capping), as the CPU backend computes them.

func (b *Backend) GeluGLU(dst, gate, up backend.Tensor, n int) {
	d, g, u := b.region("gelu_glu", dst, 0, n), b.region("gelu_glu", gate, 0, n), b.region("gelu_glu", up, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.GeluGLU(d, g, u, n)
}

func (b *Backend) Scale(x backend.Tensor, s float32, n int) {
	d := b.region("scale", x, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.Scale(d, s, n)
}

func (b *Backend) Softcap(x backend.Tensor, c float32, n int) {
	d := b.region("softcap", x, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.Softcap(d, c, n)
}
