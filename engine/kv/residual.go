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

// TailRing says which position each row of a residual window's ring holds
// (-1: none; row p mod len for position p). The CPU cache keeps one per
// layer, and so does a backend that keeps the ring itself (Metal), so that
// both read the same positions from f16.
type TailRing []int32

// NewTailRing is the ring of a window of w rows, holding nothing.
func NewTailRing(w int) TailRing {
	t := make(TailRing, w)
	for r := range t {
		t[r] = -1
	}
	return t
}

// Forget drops the rows of positions at or after pos: an append there
// rewrites them, and a row not rewritten must not outlive its codes.
func (t TailRing) Forget(pos int) {
	for r, p := range t {
		if int(p) >= pos {
			t[r] = -1
		}
	}
}

// Note records that position pos's row is stored.
func (t TailRing) Note(pos int) { t[pos%len(t)] = int32(pos) }

// Holds reports whether the ring holds position pos.
func (t TailRing) Holds(pos int) bool { return len(t) > 0 && pos >= 0 && int(t[pos%len(t)]) == pos }

// Start is where the f16 range of a read of positions [lo, n) begins: the
// smallest s ≥ lo such that the ring holds every position of [s, n).
// Positions [lo, s) are read from their codes; s = n means no f16 range.
func (t TailRing) Start(lo, n int) int {
	s := n
	for s > lo && s > n-len(t) && t.Holds(s-1) {
		s--
	}
	return s
}

// TailHolds reports whether the ring holds position pos.
func (lv *LayerView) TailHolds(pos int) bool { return lv.tailPos.Holds(pos) }

// TailStart is where the f16 range of a read of positions [lo, n) begins:
// the smallest t ≥ lo such that the ring holds every position of [t, n).
// Positions [lo, t) are read from their codes; t = n means no f16 range.
func (lv *LayerView) TailStart(lo, n int) int { return lv.tailPos.Start(lo, n) }

// TailRow is the f16 copy of (head, pos) in plane p's ring, HeadDim halves
// (K as stored: smoothed and rotated); pos must be held (TailHolds).
func (lv *LayerView) TailRow(p *Plane, head, pos int) []uint16 {
	d := lv.HeadDim
	row := (head*lv.Window + pos%lv.Window) * d
	return p.Tail[row : row+d]
}
