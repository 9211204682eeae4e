package metal

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// kvCache is a cache in device memory: per layer a K and a V plane, the
// bytes of the CPU cache's (docs/ARCHITECTURE.md, "KV cache format": codes,
// metadata and the residual window's f16 ring; a sliding-window layer's
// hold its window's slots, kv.Config.LayerPlaneBytes), a λ
// buffer per layer when the cache smooths, and one attention workspace
// shared by the layers (the list runs its dispatches in order).
type kvCache struct {
	b        *Backend
	cfg      kv.Config
	heads    int
	maxBatch int
	layers   []encoder.KVLayer
	ws       encoder.Region
	owned    []device.Buffer
}

func (c *kvCache) Config() kv.Config { return c.cfg }

// Close gives the cache's memory back (after the work encoded so far has
// run); closing twice is harmless.
func (c *kvCache) Close() error {
	if !c.b.closed {
		for _, buf := range c.owned {
			c.b.release(buf)
		}
	}
	c.owned, c.layers = nil, nil
	return nil
}

// lambdaBytes is the λ buffers of a cache of cfg: each layer's KVHeads·
// HeadDim float32s when it smooths.
func lambdaBytes(cfg kv.Config) int64 {
	if !cfg.Smooths() {
		return 0
	}
	var n int64
	for l := range cfg.Layers {
		c := encoder.KVLayer{Cfg: cfg, Layer: l}
		n += int64(c.LambdaFloats()) * 4
	}
	return n
}

// workspaceBytes is what NewKVCache allocates besides cfg.Bytes().
func workspaceBytes(cfg kv.Config, heads, maxBatch int) int64 {
	return lambdaBytes(cfg) + int64(encoder.WorkspaceBytes(cfg, heads, maxBatch))
}

// NewKVCache allocates the planes, the λ buffers (holding ones until
// KVSetSmoothing) and the attention workspace for heads query heads and
// prefill batches of up to maxBatch rows.
func (b *Backend) NewKVCache(cfg kv.Config, heads, maxBatch int) (backend.KVCache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case heads <= 0 || heads%cfg.KVHeads != 0:
		return nil, fmt.Errorf("metal: %d query heads for %d kv heads", heads, cfg.KVHeads)
	case maxBatch <= 0:
		return nil, fmt.Errorf("metal: prefill batch of %d rows", maxBatch)
	case cfg.Evicts():
		// Eviction maps logical positions to slots, moves codes and keeps
		// scores on the host side of the CPU cache; the Metal cache has
		// none of that yet.
		return nil, fmt.Errorf("metal: KV eviction (%s) is not available on Metal yet; use --backend cpu", cfg.Evict.Policy)
	}
	c := &kvCache{b: b, cfg: cfg, heads: heads, maxBatch: maxBatch, layers: make([]encoder.KVLayer, cfg.Layers)}
	alloc := func(n int) (encoder.Region, error) {
		buf, err := b.newBuffer(n)
		if err != nil {
			return encoder.Region{}, fmt.Errorf("metal: kv cache (%d bytes): %w", n, err)
		}
		c.owned = append(c.owned, buf)
		return encoder.Region{Buf: buf, Len: n}, nil
	}
	fail := func(err error) (backend.KVCache, error) {
		c.Close()
		return nil, err
	}
	for l := range c.layers {
		lv := &c.layers[l]
		lv.Cfg, lv.Layer = cfg, l
		if heads%lv.KVHeads() != 0 {
			return fail(fmt.Errorf("metal: %d query heads for layer %d's %d kv heads", heads, l, lv.KVHeads()))
		}
		lambda := lv.LambdaFloats()
		var err error
		if lv.K, err = alloc(lv.PlaneBytes()); err != nil {
			return fail(err)
		}
		if lv.V, err = alloc(lv.PlaneBytes()); err != nil {
			return fail(err)
		}
		if cfg.Smooths() {
			if lv.Lambda, err = alloc(4 * lambda); err != nil {
				return fail(err)
			}
			mem := lv.Lambda.Buf.Bytes()
			for i := 0; i < lambda; i++ {
				binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(1))
			}
		}
	}
	if n := encoder.WorkspaceBytes(cfg, heads, maxBatch); n > 0 {
		var err error
		if c.ws, err = alloc(n); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// Evicted (backend.EvictingCache): a sliding-window ring overwrote positions
// since the sequence last started at 0, so no shorter prefix can be
// resumed (kv.Cache.RingWrapped on the CPU).
func (c *kvCache) Evicted() bool {
	for l := range c.layers {
		if c.layers[l].RingWrapped() {
			return true
		}
	}
	return false
}

// ResumableFrom is the largest p ≤ n at which the sequence can go on (the
// next store at p keeping [0, p)): the Metal cache does not evict, so what
// its ring layers allow, by the CPU cache's rule (kv.RingResumableFrom).
func (c *kvCache) ResumableFrom(n int) int {
	return kv.RingResumableFrom(n, len(c.layers), func(l int) (int, kv.RingSpan) {
		return c.layers[l].Ring(), c.layers[l].Span()
	})
}

// Kept (backend.EvictingCache): the Metal cache does not evict, so nil; a
// ring is a mapping of positions, not a choice of which to keep.
func (c *kvCache) Kept(layer, kvh int) []int { return nil }

// checkHolds reports a read of positions [lo, hi) that the layer's ring no
// longer holds.
func (b *Backend) checkHolds(op string, lv *encoder.KVLayer, lo, hi int) bool {
	if !lv.Holds(lo, hi) {
		b.enc.Failf("%s: positions [%d, %d) read from a sliding-window ring of %d slots that no longer holds them", op, lo, hi, lv.Ring())
		return false
	}
	return true
}

// cacheLayer is the cache's layer l, or an error naming op.
func cacheLayer(op string, c backend.KVCache, l int) (*kvCache, *encoder.KVLayer, error) {
	kc, ok := c.(*kvCache)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("%s: a cache of type %T, not of the metal backend", op, c)
	case kc.layers == nil:
		return nil, nil, fmt.Errorf("%s: the cache is closed", op)
	case l < 0 || l >= kc.cfg.Layers:
		return nil, nil, fmt.Errorf("%s: layer %d outside [0, %d)", op, l, kc.cfg.Layers)
	}
	return kc, &kc.layers[l], nil
}

// layer returns the cache's layer l, or nil with the error recorded.
func (b *Backend) layer(op string, c backend.KVCache, l int) (*kvCache, *encoder.KVLayer) {
	kc, lv, err := cacheLayer(op, c, l)
	if err != nil {
		b.enc.Failf("%w", err)
		return nil, nil
	}
	return kc, lv
}

// KVSetSmoothing sets λ on a cache that smooths; the encoder checks it
// (kv.CheckLambda) on every cache, as the CPU's does.
func (b *Backend) KVSetSmoothing(c backend.KVCache, layer int, lambda []float32) {
	if _, lv := b.layer("kv smoothing", c, layer); lv != nil {
		b.enc.KVSetSmoothing(lv, lambda)
	}
}

func (b *Backend) KVStore(c backend.KVCache, layer int, k, v backend.Tensor, pos, rows int) {
	kc, lv := b.layer("kv store", c, layer)
	if lv == nil {
		return
	}
	if pos < 0 || rows < 0 || pos+rows > kc.cfg.Ctx {
		b.enc.Failf("kv store: positions [%d, %d) outside the context of %d", pos, pos+rows, kc.cfg.Ctx)
		return
	}
	if rows == 0 {
		return
	}
	w := lv.KVHeads() * lv.HeadDim()
	kr, vr := b.region("kv store", k, 0, rows*w), b.region("kv store", v, 0, rows*w)
	if b.enc.Err() != nil {
		return
	}
	b.enc.KVStore(lv, kr, vr, pos, rows)
}

// checkAttention reports a call whose geometry is not the cache layer's.
func (b *Backend) checkAttention(op string, kc *kvCache, lv *encoder.KVLayer, a *backend.Attention) bool {
	if a.Heads != kc.heads || a.KVHeads != lv.KVHeads() || a.HeadDim != lv.HeadDim() || a.Window < 0 {
		b.enc.Failf("%s: attention of %d heads, %d kv heads, head dim %d, window %d on a cache layer made for %d, %d, %d",
			op, a.Heads, a.KVHeads, a.HeadDim, a.Window, kc.heads, lv.KVHeads(), lv.HeadDim())
		return false
	}
	return true
}

func (b *Backend) AttendDecode(out, q backend.Tensor, c backend.KVCache, layer, n int, a *backend.Attention) {
	kc, lv := b.layer("attend decode", c, layer)
	if lv == nil || !b.checkAttention("attend decode", kc, lv, a) {
		return
	}
	if n <= 0 || n > kc.cfg.Ctx {
		b.enc.Failf("attend decode: %d positions in a context of %d", n, kc.cfg.Ctx)
		return
	}
	lo := 0
	if a.Window > 0 {
		lo = max(0, n-a.Window)
	}
	if !b.checkHolds("attend decode", lv, lo, n) {
		return
	}
	w := a.Heads * a.HeadDim
	o, qr := b.region("attend decode", out, 0, w), b.region("attend decode", q, 0, w)
	if b.enc.Err() != nil {
		return
	}
	b.enc.AttendDecode(o, qr, lv, n, a, kc.ws)
}

func (b *Backend) AttendPrefill(out, q, k, v backend.Tensor, c backend.KVCache, layer, past, rows int, a *backend.Attention) {
	kc, lv := b.layer("attend prefill", c, layer)
	if lv == nil || !b.checkAttention("attend prefill", kc, lv, a) {
		return
	}
	if past < 0 || rows <= 0 || rows > kc.maxBatch || past+rows > kc.cfg.Ctx {
		b.enc.Failf("attend prefill: %d rows after %d positions (batch of %d, context of %d)", rows, past, kc.maxBatch, kc.cfg.Ctx)
		return
	}
	lo := 0
	if a.Window > 0 {
		lo = max(0, past+1-a.Window) // the first row's window reaches furthest back
	}
	if !b.checkHolds("attend prefill", lv, lo, past) {
		return
	}
	qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	o, qr := b.region("attend prefill", out, 0, rows*qw), b.region("attend prefill", q, 0, rows*qw)
	kr, vr := b.region("attend prefill", k, 0, rows*kw), b.region("attend prefill", v, 0, rows*kw)
	if b.enc.Err() != nil {
		return
	}
	b.enc.AttendPrefill(o, qr, kr, vr, lv, past, rows, a, kc.ws)
}

// ReadKV copies the layer's planes (after Sync), the residual window's
// ring included, as the CPU backend's ReadKV does.
func (b *Backend) ReadKV(c backend.KVCache, layer int, k, v []byte) error {
	_, lv, err := cacheLayer("read kv", c, layer)
	if err != nil {
		return err
	}
	if n := lv.PlaneBytes(); len(k) != n || len(v) != n {
		return fmt.Errorf("read kv: planes are %d bytes, got buffers of %d and %d", n, len(k), len(v))
	}
	copy(k, lv.K.Buf.Bytes()[lv.K.Off:lv.K.Off+lv.K.Len])
	copy(v, lv.V.Buf.Bytes()[lv.V.Off:lv.V.Off+lv.V.Len])
	return nil
}
