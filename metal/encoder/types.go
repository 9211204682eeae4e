package encoder

import (
	"nibble/engine/ggml"
	"nibble/engine/kv"
)

// Weight is one tensor of the model's mapping: Rows rows of Cols elements
// of Type, rows Type.RowBytes(Cols) apart, from Region.Off on.
type Weight struct {
	Region
	Type       ggml.Type
	Rows, Cols int
}

// RowBytes is the distance between the weight's rows.
func (w *Weight) RowBytes() int { return w.Type.RowBytes(w.Cols) }

// KVLayer is one layer of a KV cache in device memory, in the layout of
// docs/ARCHITECTURE.md ("KV cache format"), the same bytes as the CPU
// backend's kv.Plane.Raw: each plane holds the codes of every
// (kv head, position), [head][pos][D/8 uint32 words] for q4, [D bytes] for
// q8, [D halves] for f16, followed for q4 and q8 by the metadata,
// [head][pos][D/gs half2 {scale, bias}].
type KVLayer struct {
	Cfg  kv.Config
	K, V Region
	// Lambda is the layer's K smoothing factors, KVHeads·HeadDim float32
	// powers of two, or Len 0 when the cache does not smooth. K is stored as
	// k/λ and queries meet it as q∘λ. Until KVSetSmoothing sets it, it holds
	// ones.
	Lambda Region
	// Smoothed says whether KVSetSmoothing has set factors (queries and
	// stores skip λ when not).
	Smoothed bool
}

// CodesBytes is the size of a plane's codes; the metadata starts there.
func (c *KVLayer) CodesBytes() int {
	elems := c.Cfg.KVHeads * c.Cfg.Ctx * c.Cfg.HeadDim
	switch c.Cfg.Type {
	case kv.Q4:
		return elems / 2
	case kv.Q8:
		return elems
	default:
		return 2 * elems
	}
}

// PlaneBytes is the size of one plane (K or V).
func (c *KVLayer) PlaneBytes() int {
	return c.Cfg.KVHeads * c.Cfg.Ctx * kv.BytesPerTokenHead(c.Cfg.Type, c.Cfg.HeadDim, c.Cfg.GroupSize)
}
