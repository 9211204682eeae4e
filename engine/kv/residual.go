package kv

import "nibble/engine/half"

// The f16 residual window (docs/ARCHITECTURE.md, "KV cache format"): a
// quantized cache with Config.Residual = W also keeps the most recent W
// positions of K and V as f16, in a ring at the end of each plane.
// Attention reads those positions from the ring and the older ones from
// their codes, so a token is seen quantized only once W newer tokens
// follow it, as in KIVI. Codes are still written on append, so the
// quantized range needs no second pass when a position leaves the window,
// and a rewind (appending at an earlier position) only has to forget ring
// rows, never requantize.

// storeTail writes x (HeadDim floats, K already transformed) as f16 into the
// ring row of (head, pos).
func (lv *LayerView) storeTail(p *Plane, head, pos int, x []float32) {
	d := lv.HeadDim
	row := (head*lv.Window + pos%lv.Window) * d
	dst := p.Tail[row : row+d]
	for i, f := range x {
		dst[i] = half.FromFloat32(f)
	}
}

// forgetTail drops the ring rows of positions at or after pos: an append
// there rewrites them, and a row not rewritten must not outlive its codes.
func (lv *LayerView) forgetTail(pos int) {
	for r, p := range lv.tailPos {
		if int(p) >= pos {
			lv.tailPos[r] = -1
		}
	}
}

// TailHolds reports whether the ring holds position pos.
func (lv *LayerView) TailHolds(pos int) bool {
	return lv.Window > 0 && pos >= 0 && int(lv.tailPos[pos%lv.Window]) == pos
}

// TailStart is where the f16 range of a read of positions [lo, n) begins:
// the smallest t ≥ lo such that the ring holds every position of [t, n).
// Positions [lo, t) are read from their codes; t = n means no f16 range.
func (lv *LayerView) TailStart(lo, n int) int {
	t := n
	for t > lo && t > n-lv.Window && lv.TailHolds(t-1) {
		t--
	}
	return t
}

// TailRow is the f16 copy of (head, pos) in plane p's ring, HeadDim halves
// (K as stored: smoothed and rotated); pos must be held (TailHolds).
func (lv *LayerView) TailRow(p *Plane, head, pos int) []uint16 {
	d := lv.HeadDim
	row := (head*lv.Window + pos%lv.Window) * d
	return p.Tail[row : row+d]
}
