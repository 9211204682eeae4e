package kv

import (
	"fmt"
	"unsafe"

	"nibble/engine/half"
)

// maxCacheBytes bounds a cache so size arithmetic cannot overflow; it is far
// above any machine this runs on, the estimator refuses real misfits first.
const maxCacheBytes = 1 << 46

// Plane is K or V of one layer: one allocation holding the codes followed by
// the metadata. Exactly one of Q4, Q8, F16 is set, by the cache type; all
// are indexed [kv_head][position][...] (docs/ARCHITECTURE.md, "KV cache
// format").
type Plane struct {
	Raw  []byte   // the whole allocation (what a GPU backend uploads)
	Q4   []uint32 // D/8 words per (head, pos); element i at bits 4*(i%8) of word i/8
	Q8   []uint8  // D bytes per (head, pos)
	F16  []uint16 // D halves per (head, pos)
	Meta []uint16 // q4, q8: D/gs {scale, bias} half pairs per (head, pos)
	// Tail is the residual window's ring (q4, q8 with Config.Residual):
	// per kv head, Window rows of D halves; position p is row p % Window
	// while LayerView.TailHolds(p).
	Tail []uint16
}

// LayerView is what the attention kernels read for one layer.
type LayerView struct {
	Type      Type
	KVHeads   int
	HeadDim   int
	GroupSize int
	Ctx       int
	K, V      Plane
	Rot       *Rotation // K is stored rotated; queries must be rotated too (nil: off)
	// Lambda holds the channel smoothing factors, KVHeads·HeadDim (nil:
	// off, or not calibrated): K is stored as k/λ, queries meet it as q∘λ.
	Lambda []float32
	// Window is the residual window (0: none); tailPos[r] is the position
	// whose f16 copy ring row r holds (-1: none).
	Window  int
	tailPos TailRing
	// Ring is a sliding-window layer's ring size (ring.go; 0: none, every
	// position at its own slot): Ctx slots, position p at slot p mod Ring;
	// span is what it holds.
	Ring int
	span RingSpan
}

// Cache is a preallocated K/V cache for every layer.
type Cache struct {
	cfg    Config
	layers []LayerView
	bytes  int64
	keyBuf []float32   // one transformed K head vector (Append)
	lambda [][]float32 // per layer, where SetLambda copies λ (made on first use)
	ev     *evictState // nil: the cache keeps every position (evict.go)
}

// New allocates the cache through alloc (nil: make), one call per layer for
// K and one for V, each exactly Config.PlaneBytes.
func New(cfg Config, alloc func(nbytes int) []byte) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	for _, g := range cfg.Geometries() {
		bpth := BytesPerTokenHead(cfg.Type, g.HeadDim, cfg.GroupSize)
		// Divisions, not products, so absurd counts cannot overflow the check.
		if int64(cfg.Slots()) > maxCacheBytes/2/int64(bpth)/int64(cfg.Layers)/int64(g.KVHeads) {
			return nil, fmt.Errorf("kv: cache of %d layers × %d heads × %d positions is too large", cfg.Layers, g.KVHeads, cfg.Ctx)
		}
	}
	c := &Cache{cfg: cfg, layers: make([]LayerView, cfg.Layers), lambda: make([][]float32, cfg.Layers)}
	rots := map[int]*Rotation{} // by head dim
	if cfg.Rotate {
		for _, g := range cfg.Geometries() {
			if rots[g.HeadDim] == nil {
				rot, err := NewRotation(g.HeadDim)
				if err != nil {
					return nil, err
				}
				rots[g.HeadDim] = rot
			}
		}
	}
	if cfg.Rotate || cfg.Smooth {
		c.keyBuf = make([]float32, cfg.MaxHeadDim())
	}
	for l := range c.layers {
		lv := &c.layers[l]
		*lv = LayerView{Type: cfg.Type, KVHeads: cfg.KVHeadsOf(l), HeadDim: cfg.HeadDimOf(l), GroupSize: cfg.GroupSize, Ctx: cfg.LayerSlots(l),
			Rot: rots[cfg.HeadDimOf(l)], Window: cfg.LayerResidual(l), Ring: cfg.LayerRing(l)}
		planeBytes := cfg.LayerPlaneBytes(l)
		if lv.Window > 0 {
			lv.tailPos = NewTailRing(lv.Window)
		}
		for i, p := range []*Plane{&lv.K, &lv.V} {
			raw := alloc(planeBytes)
			if len(raw) != planeBytes {
				return nil, fmt.Errorf("kv: layer %d plane %d: allocator returned %d bytes, want %d", l, i, len(raw), planeBytes)
			}
			if uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 != 0 {
				return nil, fmt.Errorf("kv: layer %d plane %d: allocation is not 4-byte aligned", l, i)
			}
			c.bytes += int64(planeBytes)
			*p = carve(cfg, lv.KVHeads, lv.HeadDim, lv.Ctx, lv.Window, raw)
		}
	}
	if cfg.Evict.Policy != EvictNone {
		ev, err := newEvictState(cfg, alloc)
		if err != nil {
			return nil, err
		}
		c.ev = ev
		c.bytes += cfg.evictBytes()
	}
	return c, nil
}

// carve splits one plane allocation of slots positions per kv head into
// codes, metadata and the residual window's ring of window rows.
func carve(cfg Config, kvHeads, headDim, slots, window int, raw []byte) Plane {
	p := Plane{Raw: raw}
	elems := kvHeads * slots * headDim
	var codeBytes int
	switch cfg.Type {
	case F16:
		p.F16 = unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), elems)
		return p
	case Q8:
		codeBytes = elems
		p.Q8 = raw[:codeBytes:codeBytes]
	case Q4:
		codeBytes = elems / 2
		p.Q4 = unsafe.Slice((*uint32)(unsafe.Pointer(&raw[0])), elems/8)
	}
	metaHalves := kvHeads * slots * 2 * (headDim / cfg.GroupSize)
	p.Meta = unsafe.Slice((*uint16)(unsafe.Pointer(&raw[codeBytes])), metaHalves)
	if window > 0 {
		p.Tail = unsafe.Slice((*uint16)(unsafe.Pointer(&raw[codeBytes+2*metaHalves])), kvHeads*window*headDim)
	}
	return p
}

// Config is the shape the cache was made for.
func (c *Cache) Config() Config { return c.cfg }

// Bytes is the memory the cache holds: exactly Config().Bytes().
func (c *Cache) Bytes() int64 { return c.bytes }

// Layer returns the view the kernels read; l must be in [0, Layers).
func (c *Cache) Layer(l int) *LayerView { return &c.layers[l] }

// SetLambda sets the layer's channel smoothing factors (KVHeads·HeadDim
// powers of two, from a Calibration) for the K rows appended from now on and
// for the queries that read them; nil turns smoothing off for the layer. A
// cache that does not smooth checks λ and ignores it. The factors are
// copied.
func (c *Cache) SetLambda(layer int, lambda []float32) error {
	if layer < 0 || layer >= c.cfg.Layers {
		return fmt.Errorf("kv smoothing: layer %d outside [0, %d)", layer, c.cfg.Layers)
	}
	if lambda != nil {
		if err := CheckLambda(lambda, c.cfg.KVHeadsOf(layer), c.cfg.HeadDimOf(layer)); err != nil {
			return fmt.Errorf("layer %d: %w", layer, err)
		}
	}
	if lambda == nil || !c.cfg.Smooths() {
		c.layers[layer].Lambda = nil
		return nil
	}
	if c.lambda[layer] == nil {
		c.lambda[layer] = make([]float32, len(lambda))
	}
	copy(c.lambda[layer], lambda)
	c.layers[layer].Lambda = c.lambda[layer]
	return nil
}

// Append stores n rows of K and V at positions pos..pos+n-1 of layer,
// quantizing on store. A row is one position: KVHeads·HeadDim floats, heads
// concatenated. K is stored as the layer's smoothing and rotation make it
// (TransformKey). A cache that evicts (Config.Evict) first drops positions
// to make room, and stores the rows at their physical slots (evict.go).
func (c *Cache) Append(layer, pos int, k, v []float32, n int) error {
	cfg := c.cfg
	row := cfg.KVHeadsOf(layer) * cfg.HeadDimOf(layer)
	switch {
	case layer < 0 || layer >= cfg.Layers:
		return fmt.Errorf("kv append: layer %d outside [0, %d)", layer, cfg.Layers)
	case n < 0 || pos < 0 || pos > cfg.Ctx-n:
		return fmt.Errorf("kv append: positions [%d, %d) outside the context of %d", pos, pos+n, cfg.Ctx)
	case len(k) < n*row || len(v) < n*row:
		return fmt.Errorf("kv append: %d rows need %d floats each for K and V, got %d and %d", n, n*row, len(k), len(v))
	}
	if c.ev != nil {
		return c.appendEvicting(layer, pos, k, v, n)
	}
	c.appendAt(layer, pos, k, v, n)
	return nil
}

// appendAt stores n rows at slots pos..pos+n-1 of layer (positions, unless
// the cache evicts; modulo the ring on a sliding-window layer, which keeps
// only the last Ring rows of a longer batch).
func (c *Cache) appendAt(layer, pos int, k, v []float32, n int) {
	cfg := c.cfg
	lv := &c.layers[layer]
	lv.tailPos.Forget(pos)
	first := 0
	if lv.Ring > 0 {
		first = max(0, n-lv.Ring)
	}
	for t := first; t < n; t++ {
		// Rows the batch's own later rows push out of the window never
		// enter the ring.
		inTail := t >= n-lv.Window
		for h := 0; h < lv.KVHeads; h++ {
			src := (t*lv.KVHeads + h) * lv.HeadDim
			slot := h*lv.Ctx + lv.Slot(pos+t)
			key := lv.TransformKey(c.keyBuf, k[src:src+lv.HeadDim], h)
			lv.K.store(cfg, lv.HeadDim, slot, key)
			lv.V.store(cfg, lv.HeadDim, slot, v[src:src+lv.HeadDim])
			if inTail {
				lv.storeTail(&lv.K, h, pos+t, key)
				lv.storeTail(&lv.V, h, pos+t, v[src:src+lv.HeadDim])
			}
		}
		if inTail {
			lv.tailPos.Note(pos + t)
		}
	}
	lv.span.Note(lv.Ring, pos, n)
}

// store quantizes one head vector into slot = head·Ctx + position.
func (p *Plane) store(cfg Config, d, slot int, x []float32) {
	ng := 0
	if cfg.Type != F16 {
		ng = d / cfg.GroupSize
	}
	switch cfg.Type {
	case F16:
		dst := p.F16[slot*d : (slot+1)*d]
		for i, f := range x {
			dst[i] = half.FromFloat32(f)
		}
	case Q8:
		QuantizeGroupQ8(p.Q8[slot*d:(slot+1)*d], p.Meta[slot*2*ng:(slot+1)*2*ng], x, cfg.GroupSize)
	case Q4:
		QuantizeGroupQ4(p.Q4[slot*d/8:(slot+1)*d/8], p.Meta[slot*2*ng:(slot+1)*2*ng], x, cfg.GroupSize)
	}
}

// TransformKey returns K head vector k of kv head kvh as the cache stores
// it: R·(k/λ), written into dst (HeadDim floats), or k itself when neither
// smoothing nor rotation is on.
func (lv *LayerView) TransformKey(dst, k []float32, kvh int) []float32 {
	return lv.transform(dst, k, kvh, true)
}

// TransformQuery is TransformKey's partner for a query head of group kvh:
// R·(q∘λ), so that it meets stored keys with the original dot product.
func (lv *LayerView) TransformQuery(dst, q []float32, kvh int) []float32 {
	return lv.transform(dst, q, kvh, false)
}

func (lv *LayerView) transform(dst, x []float32, kvh int, divide bool) []float32 {
	if lv.Lambda == nil && lv.Rot == nil {
		return x
	}
	dst = dst[:lv.HeadDim]
	copy(dst, x)
	if lv.Lambda != nil {
		for i, l := range lv.Lambda[kvh*lv.HeadDim : (kvh+1)*lv.HeadDim] {
			if divide {
				dst[i] /= l
			} else {
				dst[i] *= l
			}
		}
	}
	if lv.Rot != nil {
		lv.Rot.Apply(dst, dst)
	}
	return dst
}

// Dequantize writes the value of (head, pos) into dst (HeadDim floats), in
// the original space (K's smoothing and rotation undone): for tests,
// baselines and tools, not the attention kernels.
func (lv *LayerView) Dequantize(dst []float32, plane *Plane, head, pos int) {
	lv.dequantizeStored(dst, plane, head, pos)
	if plane != &lv.K {
		return
	}
	if lv.Rot != nil {
		lv.Rot.Invert(dst, dst)
	}
	if lv.Lambda != nil {
		for i, l := range lv.Lambda[head*lv.HeadDim : (head+1)*lv.HeadDim] {
			dst[i] *= l
		}
	}
}

// dequantizeStored writes the stored codes of (head, pos) as floats.
func (lv *LayerView) dequantizeStored(dst []float32, plane *Plane, head, pos int) {
	d := lv.HeadDim
	slot := head*lv.Ctx + lv.Slot(pos)
	switch lv.Type {
	case F16:
		for i, h := range plane.F16[slot*d : (slot+1)*d] {
			dst[i] = half.ToFloat32(h)
		}
	case Q8:
		ng := d / lv.GroupSize
		DequantizeGroupQ8(dst[:d], plane.Q8[slot*d:(slot+1)*d], plane.Meta[slot*2*ng:], lv.GroupSize)
	case Q4:
		ng := d / lv.GroupSize
		DequantizeGroupQ4(dst[:d], plane.Q4[slot*d/8:(slot+1)*d/8], plane.Meta[slot*2*ng:], lv.GroupSize)
	}
}
