package kv

import "fmt"

// Sliding-window rings (docs/ARCHITECTURE.md, "KV cache format"): a layer
// whose attention sees only the last w positions keeps only those, as
// mlx-lm's RotatingKVCache does. Its planes hold w slots per kv head and
// position p lives in slot p mod w; positions keep their logical numbers
// everywhere else (the residual window's ring, the attention's visibility
// rule), so the codes, the metadata and the kernels are those of any layer.
// An append of more than w rows stores only the last w. A read must stay
// inside the positions the ring still holds (LayerView.Holds): a rewind
// past a wrap has lost what it would need. A wrapped ring reports itself
// (RingWrapped), and ResumableFrom says where the sequence can still go on:
// at its end, so a prompt that extends it appends after it.

// RingReader is implemented by a backend (or its estimator footprint) whose
// caches keep sliding-window layers in rings (Config.LayerWindow): states on
// it ask for rings, and the estimator counts them. A backend without it is
// given no LayerWindow and allocates every layer for the whole context.
type RingReader interface {
	ReadsKVRing() bool
}

// ReadsRing reports whether x, a backend or its footprint, keeps rings
// (RingReader).
func ReadsRing(x any) bool {
	r, ok := x.(RingReader)
	return ok && r.ReadsKVRing()
}

func (c Config) validateRings() error {
	if len(c.LayerWindow) == 0 {
		return nil
	}
	if len(c.LayerWindow) != c.Layers {
		return fmt.Errorf("kv: %d layer windows for %d layers", len(c.LayerWindow), c.Layers)
	}
	for l, w := range c.LayerWindow {
		switch {
		case w < 0:
			return fmt.Errorf("kv: layer %d: negative window %d", l, w)
		case w > 0 && c.Evicts():
			// Eviction's slot map and a ring's modulo would both move
			// positions; sliding-window models do not evict.
			return fmt.Errorf("kv: layer %d has a sliding window of %d; a cache that evicts cannot keep rings", l, w)
		}
	}
	return nil
}

// LayerSlots is the positions layer l's planes have room for: Slots, or
// the window of a sliding-window layer when that is smaller.
func (c Config) LayerSlots(l int) int {
	if l >= 0 && l < len(c.LayerWindow) && c.LayerWindow[l] > 0 {
		return min(c.LayerWindow[l], c.Slots())
	}
	return c.Slots()
}

// LayerRing is layer l's ring size: its slots when they are fewer than the
// context's, 0 when the layer keeps every position.
func (c Config) LayerRing(l int) int {
	if s := c.LayerSlots(l); s < c.Slots() {
		return s
	}
	return 0
}

// LayerResidual is layer l's f16 residual window: Window, capped at the
// layer's slots (a ring no longer than the residual window keeps every
// position it holds in f16 as well).
func (c Config) LayerResidual(l int) int {
	return min(c.Window(), c.LayerSlots(l))
}

// Slot is where position pos lives in a plane's kv head: pos itself, or
// pos mod the ring.
func (lv *LayerView) Slot(pos int) int {
	if lv.Ring > 0 {
		return pos % lv.Ring
	}
	return pos
}

// SlotRun is the end of the run of positions from lo (before hi) that lie
// in consecutive slots: hi, or where the ring wraps.
func (lv *LayerView) SlotRun(lo, hi int) int {
	if lv.Ring > 0 {
		return min(hi, (lo/lv.Ring+1)*lv.Ring)
	}
	return hi
}

// Holds reports whether the layer holds every position of [lo, hi) that was
// appended: always for a layer without a ring, else when none of them has
// been overwritten or forgotten by a rewind.
func (lv *LayerView) Holds(lo, hi int) bool {
	return lv.Ring == 0 || lo >= hi || lo >= lv.ringLo && hi <= lv.ringHi
}

// CheckRead reports a read of positions [lo, hi) that the layer's ring
// cannot serve, naming what it holds.
func (lv *LayerView) CheckRead(lo, hi int) error {
	if lv.Holds(lo, hi) {
		return nil
	}
	return fmt.Errorf("kv: positions [%d, %d) read from a ring of %d that holds [%d, %d)", lo, hi, lv.Ring, lv.ringLo, lv.ringHi)
}

// noteAppend records positions [pos, pos+n) as stored: the ring then holds
// them and the older positions they did not overwrite, as far back as a
// contiguous run reaches.
func (lv *LayerView) noteAppend(pos, n int) {
	if lv.Ring == 0 {
		return
	}
	lo := pos
	if pos >= lv.ringLo && pos <= lv.ringHi {
		lo = lv.ringLo
	}
	lv.ringLo, lv.ringHi = max(lo, pos+n-lv.Ring), pos+n
}

// RingWrapped reports whether a ring layer has lost positions since the
// sequence last started at position 0: the cache then may not go back to an
// earlier position (a shorter prefix) and keep what the window needs
// (ResumableFrom says which it can).
func (c *Cache) RingWrapped() bool {
	for l := range c.layers {
		if c.layers[l].Ring > 0 && c.layers[l].ringLo > 0 {
			return true
		}
	}
	return false
}

// ResumableFrom is the largest p ≤ n at which the sequence can go on (the
// next append at p, the earlier positions kept): 0 once eviction dropped
// positions (Evicted), else the largest p whose window every ring layer
// still holds. A query at p sees [p+1−window, p] and the window is at most
// the ring, so resuming needs [max(0, p+1−Ring), p); what the ring holds
// after p does not matter, the append overwrites or forgets it. So a ring
// whose positions start at 0 allows any p up to its end, and one that has
// wrapped allows p from ringLo+Ring−1 (its end, or one before it) onwards.
// Layers without a ring hold every position appended.
func (c *Cache) ResumableFrom(n int) int {
	if n <= 0 || c.Evicted() {
		return 0
	}
	p, lowest := n, 0
	for l := range c.layers {
		lv := &c.layers[l]
		if lv.Ring == 0 {
			continue
		}
		p = min(p, lv.ringHi)
		if lv.ringLo > 0 {
			lowest = max(lowest, lv.ringLo+lv.Ring-1)
		}
	}
	if p < lowest {
		return 0
	}
	return p
}
