package encoder

// TEMPORARY (being written in parallel): the signatures of the op encoders
// not written yet, so that the backend compiles against them. Whoever writes
// one deletes its stub here in the same change. This file must be gone
// before the issue is closed.

import (
	"nibble/engine/backend"
)

// ---- rms_norm.go, rope.go, elementwise.go, kv_append.go ----

func (e *Encoder) RMSNorm(dst, x Region, w *Weight, eps float32, rows int) {
	e.Failf("RMSNorm not encoded yet")
}
func (e *Encoder) AddBias(x Region, b *Weight, rows int) { e.Failf("AddBias not encoded yet") }
func (e *Encoder) RoPE(x Region, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	e.Failf("RoPE not encoded yet")
}
func (e *Encoder) SwiGLU(dst, gate, up Region, n int) { e.Failf("SwiGLU not encoded yet") }
func (e *Encoder) Add(dst, x Region, n int)           { e.Failf("Add not encoded yet") }

// Copy copies n floats from src at float offset srcOff to dst at dstOff.
func (e *Encoder) Copy(dst Region, dstOff int, src Region, srcOff, n int) {
	e.Failf("Copy not encoded yet")
}
func (e *Encoder) Argmax(dst, x Region, rows, n int) { e.Failf("Argmax not encoded yet") }

// KVSetSmoothing writes λ (nil: ones) into c.Lambda in command order.
func (e *Encoder) KVSetSmoothing(c *KVLayer, lambda []float32) {
	e.Failf("KVSetSmoothing not encoded yet")
}

// KVStore quantizes rows rows of k and v (KVHeads·HeadDim floats each) into
// positions pos.. of the layer (K divided by λ, then rotated when
// Cfg.Rotate).
func (e *Encoder) KVStore(c *KVLayer, k, v Region, pos, rows int) { e.Failf("KVStore not encoded yet") }
