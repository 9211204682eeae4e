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
// [head][pos][D/gs half2 {scale, bias}], and, with a residual window
// (Cfg.Window() > 0), by its f16 ring, [head][W rows][D halves].
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
	// Tail[r] is the position whose f16 copy ring row r holds, -1 for none
	// (Cfg.Window() rows; nil is a ring that holds nothing yet). KVStore
	// keeps it as kv.Cache.Append keeps its own, in command order, and
	// attention reads from the ring the positions it holds (TailStart).
	Tail []int32
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

// RingOffset is where a plane's residual window ring starts: after the
// codes and metadata of every position (only 4-byte aligned in general).
func (c *KVLayer) RingOffset() int {
	return c.Cfg.KVHeads * c.Cfg.Ctx * kv.BytesPerTokenHead(c.Cfg.Type, c.Cfg.HeadDim, c.Cfg.GroupSize)
}

// PlaneBytes is the size of one plane (K or V), the ring included:
// kv.Config.PlaneBytes.
func (c *KVLayer) PlaneBytes() int { return c.Cfg.PlaneBytes() }

// tailHolds reports whether the ring holds position pos.
func (c *KVLayer) tailHolds(pos int) bool {
	w := c.Cfg.Window()
	return w > 0 && pos >= 0 && len(c.Tail) == w && int(c.Tail[pos%w]) == pos
}

// TailStart is where the ring's range of a read of positions [lo, n)
// begins, as kv.LayerView.TailStart has it: the smallest t ≥ lo such that
// the ring holds every position of [t, n); [lo, t) is read from the codes.
func (c *KVLayer) TailStart(lo, n int) int {
	t := n
	for t > lo && t > n-c.Cfg.Window() && c.tailHolds(t-1) {
		t--
	}
	return t
}

// storeTail records an append of rows positions at pos: the ring forgets
// the positions at or after pos (a rewind) and takes the last W rows, as
// kv.Cache.Append does. It returns the first row of the batch that enters
// the ring.
func (c *KVLayer) storeTail(pos, rows int) (from int) {
	w := c.Cfg.Window()
	if w == 0 {
		return rows
	}
	if len(c.Tail) != w {
		c.Tail = make([]int32, w)
		for r := range c.Tail {
			c.Tail[r] = -1
		}
	}
	for r, p := range c.Tail {
		if int(p) >= pos {
			c.Tail[r] = -1
		}
	}
	from = max(0, rows-w)
	for t := from; t < rows; t++ {
		c.Tail[(pos+t)%w] = int32(pos + t)
	}
	return from
}
