package metal

import "nibble/engine/backend"

// GeluGLU, Scale and Softcap (Gemma's ops) have no kernels yet: a model
// that needs them fails at the first Sync, naming the op.
func (b *Backend) GeluGLU(dst, gate, up backend.Tensor, n int) {
	b.enc.Failf("gelu_glu: not implemented on metal yet")
}

func (b *Backend) Scale(x backend.Tensor, s float32, n int) {
	b.enc.Failf("scale: not implemented on metal yet")
}

func (b *Backend) Softcap(x backend.Tensor, c float32, n int) {
	b.enc.Failf("softcap: not implemented on metal yet")
}
