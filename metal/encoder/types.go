package encoder

import (
	"nibble/engine/backend"
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

// DeviceWeight is a backend.Weight whose bytes are on the device: the Metal
// backend's handles, and a Weight itself. Ops that take a weight inside
// their parameters (backend.Attention's Sinks) bind it through this.
type DeviceWeight interface {
	backend.Weight
	DeviceWeight() *Weight
}

// DeviceWeight is w.
func (w *Weight) DeviceWeight() *Weight { return w }

// Desc is w's shape and type (no name; its offset in its buffer).
func (w *Weight) Desc() backend.WeightDesc {
	return backend.WeightDesc{Type: w.Type, Rows: w.Rows, Cols: w.Cols, Offset: int64(w.Off)}
}

// KVLayer is one layer of a KV cache in device memory, in the layout of
// docs/ARCHITECTURE.md ("KV cache format"), the same bytes as the CPU
// backend's kv.Plane.Raw: each plane holds the codes of every
// (kv head, position), [head][pos][D/8 uint32 words] for q4, [D bytes] for
// q8, [D halves] for f16, followed for q4 and q8 by the metadata,
// [head][pos][D/gs half2 {scale, bias}], and, with a residual window
// (Cfg.Window() > 0), by its f16 ring, [head][W rows][D halves]. A
// sliding-window layer (Cfg.LayerWindow) keeps Slots() positions per kv
// head, position p at slot p mod Slots() (engine/kv's ring.go), and a
// residual ring of Residual() rows.
type KVLayer struct {
	Cfg kv.Config
	// Layer is the layer's index in Cfg: its window, slots and residual
	// rows are Cfg's for it.
	Layer int
	K, V  Region
	// Lambda is the layer's K smoothing factors, KVHeads·HeadDim float32
	// powers of two, or Len 0 when the cache does not smooth. K is stored as
	// k/λ and queries meet it as q∘λ. Until KVSetSmoothing sets it, it holds
	// ones.
	Lambda Region
	// Smoothed says whether KVSetSmoothing has set factors (queries and
	// stores skip λ when not).
	Smoothed bool
	// Tail[r] is the position whose f16 copy ring row r holds, -1 for none
	// (Residual() rows; nil is a ring that holds nothing yet). KVStore
	// keeps it as kv.Cache.Append keeps its own, in command order, and
	// attention reads from the ring the positions it holds (TailStart).
	Tail kv.TailRing
	// span is what a ring layer holds, kept by the CPU cache's rules.
	span kv.RingSpan
}

// HeadDim is the layer's head dim (its kv.Config entry: Gemma 4's global
// layers have wider heads than its local ones).
func (c *KVLayer) HeadDim() int { return c.Cfg.HeadDimOf(c.Layer) }

// KVHeads is the layer's kv head count.
func (c *KVLayer) KVHeads() int { return c.Cfg.KVHeadsOf(c.Layer) }

// LambdaFloats is the layer's smoothing factors: KVHeads()·HeadDim().
func (c *KVLayer) LambdaFloats() int { return c.KVHeads() * c.HeadDim() }

// Slots is the positions a plane keeps per kv head: the context, or a
// sliding-window layer's window when that is smaller.
func (c *KVLayer) Slots() int { return c.Cfg.LayerSlots(c.Layer) }

// Ring is the layer's ring size (Slots when they are fewer than the
// context's, 0 when every position has its own slot).
func (c *KVLayer) Ring() int { return c.Cfg.LayerRing(c.Layer) }

// Residual is the rows of the layer's f16 residual window ring.
func (c *KVLayer) Residual() int { return c.Cfg.LayerResidual(c.Layer) }

// CodesBytes is the size of a plane's codes (kv.TokenHeadLayout); the
// metadata starts there. Its config has passed kv.Config.Validate, which
// refuses a type without a layout.
func (c *KVLayer) CodesBytes() int {
	l, _ := kv.TokenHeadLayout(c.Cfg.Type, c.HeadDim(), c.Cfg.GroupSize)
	return c.KVHeads() * c.Slots() * l.Codes
}

// RingOffset is where a plane's residual window ring starts: after the
// codes and metadata of every slot (only 4-byte aligned in general).
func (c *KVLayer) RingOffset() int {
	return c.KVHeads() * c.Slots() * kv.BytesPerTokenHead(c.Cfg.Type, c.HeadDim(), c.Cfg.GroupSize)
}

// PlaneBytes is the size of one plane (K or V), the ring included:
// kv.Config.LayerPlaneBytes.
func (c *KVLayer) PlaneBytes() int { return c.Cfg.LayerPlaneBytes(c.Layer) }

// TailStart is where the ring's range of a read of positions [lo, n)
// begins (kv.TailRing.Start): the smallest t ≥ lo such that the ring holds
// every position of [t, n); [lo, t) is read from the codes.
func (c *KVLayer) TailStart(lo, n int) int { return c.Tail.Start(lo, n) }

// storeTail records an append of rows positions at pos: the ring forgets
// the positions at or after pos (a rewind) and takes the last W rows, as
// kv.Cache.Append does. It returns the first row of the batch that enters
// the ring.
func (c *KVLayer) storeTail(pos, rows int) (from int) {
	w := c.Residual()
	if w == 0 {
		return rows
	}
	if len(c.Tail) != w {
		c.Tail = kv.NewTailRing(w)
	}
	c.Tail.Forget(pos)
	from = max(0, rows-w)
	for t := from; t < rows; t++ {
		c.Tail.Note(pos + t)
	}
	return from
}

// Span is what a ring layer holds (kv.RingSpan, noted as each store is
// encoded).
func (c *KVLayer) Span() kv.RingSpan { return c.span }

// Holds reports whether the layer holds every position of [lo, hi) that
// was stored: always without a ring, else when none of them has been
// overwritten or forgotten by a rewind.
func (c *KVLayer) Holds(lo, hi int) bool { return c.span.Holds(c.Ring(), lo, hi) }

// RingWrapped reports whether a ring layer has lost positions since the
// sequence last started at position 0 (kv.Cache.RingWrapped).
func (c *KVLayer) RingWrapped() bool { return c.span.Wrapped(c.Ring()) }
