package kv

import (
	"fmt"
	"slices"
	"unsafe"
)

// Eviction (docs/ARCHITECTURE.md, "Eviction (H2O)"): a cache with a token
// budget holds at most Budget positions per layer. Positions keep their
// logical numbers (K was stored rotated by RoPE at its position, so nothing
// is recomputed); only the physical length is bounded. Before rows that
// would overflow the budget are stored, the layer drops positions: the
// kept ones move down, codes, metadata and residual ring rows as they are
// (never requantized), in position order. Slot = position − evicted, the
// same for every kv head and, after a whole forward pass, every layer.

// EvictPolicy is how a cache with a budget chooses the positions it drops.
type EvictPolicy uint8

const (
	// EvictNone keeps every position of the context.
	EvictNone EvictPolicy = iota
	// EvictWindow keeps the most recent Budget positions (a sliding window,
	// no sinks): the baseline H2O is measured against.
	EvictWindow
	// EvictH2O keeps the first Sinks positions, the most recent Recent
	// ones, and fills the rest of the budget with the positions the
	// attention has weighted most (Zhang et al., "H2O", 2023).
	EvictH2O
)

func (p EvictPolicy) String() string {
	switch p {
	case EvictNone:
		return "none"
	case EvictWindow:
		return "window"
	case EvictH2O:
		return "h2o"
	}
	return fmt.Sprintf("evict(%d)", uint8(p))
}

// Eviction is a cache's budget and how it is kept.
type Eviction struct {
	Policy EvictPolicy
	// Budget is the positions each layer holds, the planes' capacity: at
	// most Ctx (0 with EvictNone).
	Budget int
	// Sinks and Recent (H2O) are the first and the most recent positions
	// that are never dropped (Recent at least the residual window); when
	// they leave no room, Recent yields first.
	Sinks, Recent int
	// PerHead (H2O) lets each kv head keep its own heavy hitters; off, one
	// choice per layer by the score summed over its kv heads.
	PerHead bool
}

// DefaultSinks is the attention sinks H2O keeps (StreamingLLM's four).
const DefaultSinks = 4

// DefaultEviction is policy p at budget positions with the defaults: for
// H2O, DefaultSinks sinks, half the budget as the recent window (the H2O
// paper's split) and heavy hitters per kv head.
func DefaultEviction(p EvictPolicy, budget int) Eviction {
	e := Eviction{Policy: p, Budget: budget}
	if p == EvictH2O {
		e.Sinks, e.Recent, e.PerHead = min(DefaultSinks, budget), budget/2, true
	}
	return e
}

// Slack is how many positions beyond the need an eviction drops: 1/32 of
// the budget. Moving the kept positions down costs about what reading them
// does, so a decode step that made room for its one row every time would
// nearly double the cache's memory traffic; with the slack it makes room
// once every Slack tokens, and the cache holds between Budget−Slack and
// Budget positions.
func (e Eviction) Slack() int { return e.Budget / 32 }

// MaxBatch is the largest prefill batch a session gives a cache evicting
// at this budget: an eighth of it. The rows of a batch attend to the cache
// before it makes room for them, so a row sees at most the budget plus the
// batch; a small batch keeps that close to the budget (decode sees exactly
// the budget).
func (e Eviction) MaxBatch() int { return max(1, e.Budget/8) }

// ParseEvictPolicy accepts none, window and h2o.
func ParseEvictPolicy(s string) (EvictPolicy, error) {
	for _, p := range []EvictPolicy{EvictNone, EvictWindow, EvictH2O} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown eviction policy %q (want h2o or window)", s)
}

func (e Eviction) validate(c Config) error {
	switch {
	case e.Policy > EvictH2O:
		return fmt.Errorf("kv: unknown eviction policy %d", e.Policy)
	case e.Policy == EvictNone && e.Budget != 0:
		return fmt.Errorf("kv: a budget of %d positions without an eviction policy", e.Budget)
	case e.Policy == EvictNone:
		return nil
	case e.Budget < 1 || e.Budget > c.Ctx:
		return fmt.Errorf("kv: eviction budget %d outside [1, %d] (the context)", e.Budget, c.Ctx)
	case e.Sinks < 0 || e.Recent < 0:
		return fmt.Errorf("kv: negative sinks %d or recent window %d", e.Sinks, e.Recent)
	}
	return nil
}

// Slots is the positions each plane has room for: the eviction budget, or
// the whole context.
func (c Config) Slots() int {
	if c.Evict.Policy != EvictNone {
		return c.Evict.Budget
	}
	return c.Ctx
}

// Evicts reports whether a cache of c may drop positions.
func (c Config) Evicts() bool { return c.Evict.Policy != EvictNone }

// evictBytes is what eviction adds to the cache: per layer and kv head, the
// logical position of every slot (int32) and, for H2O, its accumulated
// score (float32); per cache, H2O's pending scores of a prefill batch's
// rows (KVHeads·Slots floats) and the selection's scratch (2·Slots int32
// and Slots floats).
func (c Config) evictBytes() int64 {
	if !c.Evicts() {
		return 0
	}
	perSlot := int64(4)
	if c.Evict.Policy == EvictH2O {
		perSlot += 4
	}
	n := int64(c.Layers)*int64(c.KVHeads)*int64(c.Slots())*perSlot + 12*int64(c.Slots())
	if c.Evict.Policy == EvictH2O {
		n += 4 * int64(c.KVHeads) * int64(c.Slots())
	}
	return n
}

// evictState is the cache's bookkeeping of what it dropped.
type evictState struct {
	e      Eviction
	slots  int
	heads  int
	layers []evictLayer
	// pending holds prefill's column sums for a batch's new rows,
	// [kv head][row] at stride slots, for the Append of (pendLayer,
	// pendRows) that follows (-1: none).
	pending             []float32
	pendLayer, pendRows int
	order, dropped      []int32   // selection scratch, Slots each
	sum                 []float32 // shared selection: the score summed over kv heads
}

type evictLayer struct {
	length, evicted int       // logical positions stored; positions dropped
	pos             []int32   // [kv head][slot]: the slot's logical position
	scores          []float32 // [kv head][slot]: accumulated attention (H2O; nil otherwise)
}

func newEvictState(cfg Config, alloc func(int) []byte) (*evictState, error) {
	nbytes := int(cfg.evictBytes())
	raw := alloc(nbytes)
	if len(raw) != nbytes || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 != 0 {
		return nil, fmt.Errorf("kv: eviction state: allocator returned %d bytes, want %d (4-byte aligned)", len(raw), nbytes)
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&raw[0])), nbytes/4)
	take := func(n int) []uint32 {
		s := words[:n:n]
		words = words[n:]
		return s
	}
	asF := func(w []uint32) []float32 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(w))), len(w))
	}
	asI := func(w []uint32) []int32 { return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(w))), len(w)) }
	slots, heads := cfg.Slots(), cfg.KVHeads
	ev := &evictState{e: cfg.Evict, slots: slots, heads: heads, layers: make([]evictLayer, cfg.Layers), pendLayer: -1}
	h2o := cfg.Evict.Policy == EvictH2O
	for l := range ev.layers {
		ev.layers[l].pos = asI(take(heads * slots))
		if h2o {
			ev.layers[l].scores = asF(take(heads * slots))
		}
	}
	if h2o {
		ev.pending = asF(take(heads * slots))
	}
	ev.order, ev.dropped, ev.sum = asI(take(slots)), asI(take(slots)), asF(take(slots))
	return ev, nil
}

// Evicts reports whether the cache may drop positions (Config.Evict).
func (c *Cache) Evicts() bool { return c.ev != nil }

// Evicted reports whether any layer dropped a position since the sequence
// last started at position 0: the cache then no longer holds a contiguous
// prefix, and nothing of it can be reused for another prompt.
func (c *Cache) Evicted() bool {
	if c.ev == nil {
		return false
	}
	for _, l := range c.ev.layers {
		if l.evicted > 0 {
			return true
		}
	}
	return false
}

// Physical maps n, a logical position count of layer (a decode's n, a
// prefill's past), to the slots that hold them: n minus the positions
// dropped. n must lie between the dropped and the stored positions, or be
// 0 (a prefill that starts the sequence over).
func (c *Cache) Physical(layer, n int) (int, error) {
	if c.ev == nil || n == 0 {
		return n, nil
	}
	if layer < 0 || layer >= c.cfg.Layers {
		return 0, fmt.Errorf("kv: layer %d outside [0, %d)", layer, c.cfg.Layers)
	}
	l := &c.ev.layers[layer]
	if n < l.evicted || n > l.length {
		return 0, fmt.Errorf("kv: layer %d holds positions up to %d with %d evicted; %d is not among them", layer, l.length, l.evicted, n)
	}
	return n - l.evicted, nil
}

// Kept lists the logical positions layer holds for kv head kvh, in slot
// order (ascending): for tests and tools. Nil when the cache does not evict.
func (c *Cache) Kept(layer, kvh int) []int {
	if c.ev == nil {
		return nil
	}
	l := &c.ev.layers[layer]
	n := l.length - l.evicted
	out := make([]int, n)
	for i, p := range l.pos[kvh*c.ev.slots : kvh*c.ev.slots+n] {
		out[i] = int(p)
	}
	return out
}

// Scores is layer's accumulated attention per (kv head, slot), KVHeads rows
// of Slots floats, that attention adds to: nil unless the cache evicts by
// score (H2O).
func (c *Cache) Scores(layer int) []float32 {
	if c.ev == nil {
		return nil
	}
	return c.ev.layers[layer].scores
}

// PendingScores returns, zeroed, where prefill attention leaves the
// attention a batch of rows new rows of layer received ([kv head][row] at
// stride Slots): the Append of those rows to layer that follows gives each
// stored row its sum. Nil unless the cache evicts by score, or when the
// batch is larger than the budget (its Append fails).
func (c *Cache) PendingScores(layer, rows int) []float32 {
	if c.ev == nil || c.ev.pending == nil || rows > c.ev.slots {
		return nil
	}
	c.ev.pendLayer, c.ev.pendRows = layer, rows
	clear(c.ev.pending)
	return c.ev.pending
}

// appendEvicting is Append for a cache with a budget: position 0 starts the
// sequence over; an append at the end drops what must go to make room and
// stores the rows after the kept positions.
func (c *Cache) appendEvicting(layer, pos int, k, v []float32, n int) error {
	ev := c.ev
	l := &ev.layers[layer]
	switch {
	case pos == 0:
		l.length, l.evicted = 0, 0
	case pos > l.length:
		return fmt.Errorf("kv append: position %d leaves a gap after the %d positions layer %d holds", pos, l.length, layer)
	case pos < l.length && l.evicted > 0:
		return fmt.Errorf("kv append: position %d rewinds layer %d after %d positions were evicted (only position 0 starts over)", pos, layer, l.evicted)
	case pos < l.length:
		l.length = pos
	}
	if n > ev.slots {
		return fmt.Errorf("kv append: %d rows exceed the eviction budget of %d positions (use a smaller batch)", n, ev.slots)
	}
	phys := l.length - l.evicted
	if over := phys + n - ev.slots; over > 0 {
		// A little more than needed, so that decode compacts once every
		// Slack tokens rather than on every one.
		drop := min(phys, over+ev.e.Slack())
		c.evict(layer, phys, drop)
		phys -= drop
	}
	c.appendAt(layer, phys, k, v, n)
	pending := ev.pendLayer == layer && ev.pendRows == n
	ev.pendLayer = -1
	for h := 0; h < ev.heads; h++ {
		base := h*ev.slots + phys
		for i := 0; i < n; i++ {
			l.pos[base+i] = int32(pos + i)
		}
		if l.scores != nil {
			dst := l.scores[base : base+n]
			if pending {
				copy(dst, ev.pending[h*ev.slots:h*ev.slots+n])
			} else {
				clear(dst)
			}
		}
	}
	l.length = pos + n
	l.evicted = l.length - (phys + n)
	return nil
}

// evict drops drop of layer's n slots: the sinks and the recent window stay,
// and of the positions between them those with the lowest scores go (the
// oldest first among equal scores; all of them for the window policy).
func (c *Cache) evict(layer, n, drop int) {
	ev := c.ev
	keep := n - drop
	sinks, recent := 0, keep
	if ev.e.Policy == EvictH2O {
		// The residual window's positions count as recent, so that its
		// ring rows all stay (they are the most precise copies).
		sinks = min(ev.e.Sinks, keep)
		recent = min(max(ev.e.Recent, c.layers[layer].Window), keep-sinks)
	}
	// Candidates are slots [sinks, n-recent); drop of them go.
	lo, hi := sinks, n-recent
	l := &ev.layers[layer]
	if ev.e.Policy != EvictH2O || !ev.e.PerHead {
		var score []float32
		if l.scores != nil {
			score = ev.sum[:n]
			clear(score)
			for h := 0; h < ev.heads; h++ {
				for i, s := range l.scores[h*ev.slots : h*ev.slots+n] {
					score[i] += s
				}
			}
		}
		dropped := ev.choose(score, lo, hi, drop)
		for h := 0; h < ev.heads; h++ {
			c.compact(layer, h, n, dropped)
		}
	} else {
		for h := 0; h < ev.heads; h++ {
			dropped := ev.choose(l.scores[h*ev.slots:h*ev.slots+n], lo, hi, drop)
			c.compact(layer, h, n, dropped)
		}
	}
	c.layers[layer].shiftTail(n-recent, drop)
}

// choose returns, ascending, the drop slots of [lo, hi) with the lowest
// score (nil score: the oldest).
func (ev *evictState) choose(score []float32, lo, hi, drop int) []int32 {
	out := ev.dropped[:drop]
	switch {
	case score == nil || drop == hi-lo:
		for i := range out {
			out[i] = int32(lo + i)
		}
	case drop == 1:
		best := lo
		for i := lo + 1; i < hi; i++ {
			if score[i] < score[best] {
				best = i
			}
		}
		out[0] = int32(best)
	default:
		order := ev.order[:hi-lo]
		for i := range order {
			order[i] = int32(lo + i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			switch sa, sb := score[a], score[b]; {
			case sa < sb:
				return -1
			case sa > sb:
				return 1
			}
			return 0
		})
		copy(out, order[:drop])
		slices.Sort(out)
	}
	return out
}

// compact removes the dropped slots (ascending) of kv head h among the
// layer's first n, moving the kept ones down in order: codes, metadata,
// logical positions and scores, byte for byte.
func (c *Cache) compact(layer, h, n int, dropped []int32) {
	if len(dropped) == 0 {
		return
	}
	ev := c.ev
	lv, l := &c.layers[layer], &ev.layers[layer]
	base := h * ev.slots
	dst := int(dropped[0])
	for i, d := range dropped {
		// The kept run between this dropped slot and the next.
		from, to := int(d)+1, n
		if i+1 < len(dropped) {
			to = int(dropped[i+1])
		}
		if cnt := to - from; cnt > 0 {
			lv.K.moveSlots(c.cfg, base+dst, base+from, cnt)
			lv.V.moveSlots(c.cfg, base+dst, base+from, cnt)
			copy(l.pos[base+dst:base+dst+cnt], l.pos[base+from:base+to])
			if l.scores != nil {
				copy(l.scores[base+dst:base+dst+cnt], l.scores[base+from:base+to])
			}
			dst += cnt
		}
	}
}

// moveSlots copies cnt slots' codes and metadata from slot src to slot dst
// (dst < src; the ranges may overlap).
func (p *Plane) moveSlots(cfg Config, dst, src, cnt int) {
	d := cfg.HeadDim
	switch cfg.Type {
	case F16:
		copy(p.F16[dst*d:(dst+cnt)*d], p.F16[src*d:(src+cnt)*d])
		return
	case Q8:
		copy(p.Q8[dst*d:(dst+cnt)*d], p.Q8[src*d:(src+cnt)*d])
	case Q4:
		w := d / 8
		copy(p.Q4[dst*w:(dst+cnt)*w], p.Q4[src*w:(src+cnt)*w])
	}
	m := 2 * d / cfg.GroupSize
	copy(p.Meta[dst*m:(dst+cnt)*m], p.Meta[src*m:(src+cnt)*m])
}

// shiftTail follows a compaction that moved slots [from, n) down by drop:
// their residual ring rows move with them (a rotation of each head's ring
// by drop rows), and rows of any other slot are forgotten.
func (lv *LayerView) shiftTail(from, drop int) {
	w := lv.Window
	if w == 0 {
		return
	}
	if s := drop % w; s != 0 {
		d := lv.HeadDim
		for _, p := range []*Plane{&lv.K, &lv.V} {
			for h := 0; h < lv.KVHeads; h++ {
				rotateRows(p.Tail[h*w*d:(h+1)*w*d], d, s)
			}
		}
		rotateRows(lv.tailPos, 1, s)
	}
	for r, p := range lv.tailPos {
		switch {
		case p < 0:
		case int(p) >= from:
			lv.tailPos[r] = p - int32(drop)
		default:
			lv.tailPos[r] = -1
		}
	}
}

// rotateRows rotates a, rows of d elements, left by s rows in place: row r
// moves to row r-s (mod the row count).
func rotateRows[T any](a []T, d, s int) {
	n := len(a) / d
	reverseRows(a[:s*d], d)
	reverseRows(a[s*d:], d)
	reverseRows(a[:n*d], d)
}

func reverseRows[T any](a []T, d int) {
	for i, j := 0, len(a)/d-1; i < j; i, j = i+1, j-1 {
		ri, rj := a[i*d:(i+1)*d], a[j*d:(j+1)*d]
		for e := range ri {
			ri[e], rj[e] = rj[e], ri[e]
		}
	}
}
