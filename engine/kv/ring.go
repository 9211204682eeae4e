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

// RingSpan is what a sliding-window ring holds: the positions [lo, hi)
// stored since the sequence last started at 0 that later ones have not
// overwritten. The CPU cache keeps one per layer, and so does a backend
// that keeps rings of its own (Metal), so that both follow the same rules.
type RingSpan struct{ lo, hi int }

// Note records positions [pos, pos+n) as stored in a ring of size slots:
// the ring then holds them and the older positions they did not
// overwrite, as far back as a contiguous run reaches.
func (r *RingSpan) Note(size, pos, n int) {
	if size == 0 {
		return
	}
	lo := pos
	if pos >= r.lo && pos <= r.hi {
		lo = r.lo
	}
	r.lo, r.hi = max(lo, pos+n-size), pos+n
}

// Holds reports whether a ring of size slots (0: not a ring, every
// position kept) holds every position of [lo, hi) that was stored.
func (r RingSpan) Holds(size, lo, hi int) bool {
	return size == 0 || lo >= hi || lo >= r.lo && hi <= r.hi
}

// Held is the positions [lo, hi) the ring holds.
func (r RingSpan) Held() (lo, hi int) { return r.lo, r.hi }

// Wrapped reports whether a ring of size slots has lost positions since
// the sequence last started at position 0.
func (r RingSpan) Wrapped(size int) bool { return size > 0 && r.lo > 0 }

// RingResumableFrom is the largest p ≤ n at which a sequence can go on
// (the next append at p, the earlier positions kept) given its layers'
// rings, ring(l) being layer l's size and span: the largest p whose window
// every ring layer still holds. A query at p sees [p+1−window, p] and the
// window is at most the ring, so resuming needs [max(0, p+1−size), p);
// what the ring holds after p does not matter, the append overwrites or
// forgets it. So a ring whose positions start at 0 allows any p up to its
// end, and one that has wrapped allows p from lo+size−1 (its end, or one
// before it) onwards. Layers without a ring hold every position appended.
func RingResumableFrom(n, layers int, ring func(l int) (size int, span RingSpan)) int {
	if n <= 0 {
		return 0
	}
	p, lowest := n, 0
	for l := range layers {
		size, r := ring(l)
		if size == 0 {
			continue
		}
		p = min(p, r.hi)
		if r.lo > 0 {
			lowest = max(lowest, r.lo+size-1)
		}
	}
	if p < lowest {
		return 0
	}
	return p
}

// Holds reports whether the layer holds every position of [lo, hi) that was
// appended: always for a layer without a ring, else when none of them has
// been overwritten or forgotten by a rewind.
func (lv *LayerView) Holds(lo, hi int) bool { return lv.span.Holds(lv.Ring, lo, hi) }

// CheckRead reports a read of positions [lo, hi) that the layer's ring
// cannot serve, naming what it holds.
func (lv *LayerView) CheckRead(lo, hi int) error {
	if lv.Holds(lo, hi) {
		return nil
	}
	held, upTo := lv.span.Held()
	return fmt.Errorf("kv: positions [%d, %d) read from a ring of %d that holds [%d, %d)", lo, hi, lv.Ring, held, upTo)
}

// RingWrapped reports whether a ring layer has lost positions since the
// sequence last started at position 0: the cache then may not go back to an
// earlier position (a shorter prefix) and keep what the window needs
// (ResumableFrom says which it can).
func (c *Cache) RingWrapped() bool {
	for l := range c.layers {
		if c.layers[l].span.Wrapped(c.layers[l].Ring) {
			return true
		}
	}
	return false
}

// ResumableFrom is the largest p ≤ n at which the sequence can go on (the
// next append at p, the earlier positions kept): 0 once eviction dropped
// positions (Evicted), else what the ring layers allow (RingResumableFrom).
func (c *Cache) ResumableFrom(n int) int {
	if c.Evicted() {
		return 0
	}
	return RingResumableFrom(n, len(c.layers), func(l int) (int, RingSpan) { return c.layers[l].Ring, c.layers[l].span })
}
