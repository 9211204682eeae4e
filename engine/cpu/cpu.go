// Package cpu is the reference backend: every op runs at once on Go worker
// goroutines. The Metal backend does not exist yet; its kernels will be
// tested against these.
package cpu

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"nibble/engine/backend"
	"nibble/engine/cpu/attention"
	"nibble/engine/kv"
	"nibble/engine/parallel"
	"nibble/engine/quant"
)

// Backend implements backend.Backend on the CPU.
type Backend struct {
	pool      *parallel.Pool
	allocated atomic.Int64
	mu        sync.Mutex       // guards err and mappings
	err       error            // first kernel error, reported at Sync
	mappings  map[*byte][]byte // off-heap allocations by address, unmapped by release or Close
}

// New returns a CPU backend running on threads goroutines (<= 0: all cores).
func New(threads int) *Backend { return &Backend{pool: parallel.NewPool(threads)} }

// Tensor is a CPU activation buffer.
type Tensor struct{ D []float32 }

func f(t backend.Tensor) []float32 { return t.(*Tensor).D }

func (b *Backend) Name() string { return "cpu" }

// Threads is the worker count.
func (b *Backend) Threads() int { return b.pool.Threads() }

func (b *Backend) Alloc(n int) backend.Tensor {
	return &Tensor{D: bytesAsFloats(b.allocRaw(4 * n))}
}

// AllocBytes hands out counted raw memory (caches, workspaces).
func (b *Backend) AllocBytes(n int) []byte { return b.allocRaw(n) }

func (b *Backend) AllocatedBytes() int64 { return b.allocated.Load() }

// Free gives a tensor made by Alloc back; it must not be used afterwards.
func (b *Backend) Free(t backend.Tensor) {
	if t, ok := t.(*Tensor); ok && t.D != nil {
		b.release(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.D))), 4*len(t.D)))
		t.D = nil
	}
}

type kvCache struct {
	c      *kv.Cache
	wsBy   []*attention.Workspace  // per layer: the workspace of its geometry (kv.Config.Geometries)
	scores *attention.ScoreScratch // H2O eviction's score accumulation (nil: none)
	b      *Backend
	owned  [][]byte // every allocation of the cache and its workspace
}

// Close gives the cache's memory back to the backend; the cache must not be
// used afterwards. Closing twice is harmless.
func (k *kvCache) Close() error {
	for _, p := range k.owned {
		k.b.release(p)
	}
	k.owned, k.c, k.wsBy = nil, nil, nil
	return nil
}

func (k *kvCache) Config() kv.Config { return k.c.Config() }

// workspace is the attention workspace of layer's geometry (nil outside
// the cache's layers: the kernels report it).
func (k *kvCache) workspace(layer int) *attention.Workspace {
	if layer < 0 || layer >= len(k.wsBy) {
		return nil
	}
	return k.wsBy[layer]
}

// attnParams is the kernels' view of a layer's attention; the sinks weight
// (one F32 row of Heads logits) is read in place.
func (b *Backend) attnParams(a *backend.Attention) attention.Params {
	p := attention.Params{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Scale: a.Scale, Window: a.Window, Softcap: a.Softcap}
	if a.Sinks != nil {
		p.Sinks = b.vector(a.Sinks)
	}
	return p
}

// RotatesHeadDim (backend.KVRotator): the CPU rotates every head dim the
// cache accepts (kv.Rotation).
func (b *Backend) RotatesHeadDim(d int) bool { return d > 0 && d%8 == 0 && d <= kv.MaxRotationDim }

func (b *Backend) NewKVCache(cfg kv.Config, heads, maxBatch int) (backend.KVCache, error) {
	k := &kvCache{b: b}
	alloc := func(n int) []byte {
		p := b.allocRaw(n)
		k.owned = append(k.owned, p)
		return p
	}
	c, err := kv.New(cfg, alloc)
	if err != nil {
		k.Close()
		return nil, err
	}
	// One workspace per head shape: Gemma 4's local and global layers
	// differ.
	k.c, k.wsBy = c, make([]*attention.Workspace, cfg.Layers)
	byGeometry := map[kv.Geometry]*attention.Workspace{}
	for l := range cfg.Layers {
		g := kv.Geometry{KVHeads: cfg.KVHeadsOf(l), HeadDim: cfg.HeadDimOf(l)}
		if byGeometry[g] == nil {
			p := attention.Params{Heads: heads, KVHeads: g.KVHeads, HeadDim: g.HeadDim}
			byGeometry[g] = attention.NewWorkspace(p, cfg.Slots(), maxBatch, b.pool.Threads(), alloc)
		}
		k.wsBy[l] = byGeometry[g]
	}
	geometry := attention.Params{Heads: heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim}
	if cfg.Evict.Policy == kv.EvictH2O {
		if k.scores, err = attention.NewScoreScratch(geometry, cfg.Slots(), maxBatch, alloc); err != nil {
			k.Close()
			return nil, err
		}
	}
	return k, nil
}

// fail records the first kernel error until Sync. The lock makes a stray
// concurrent user a wrong answer rather than a data race; the engine service
// never lets two goroutines use one backend at a time.
func (b *Backend) fail(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight, tokens []int32) {
	d := f(dst)
	m := matrix(table)
	for i, t := range tokens {
		// The forward pass checks tokens first; this keeps a stray caller's
		// bad id an error rather than a panic.
		if t < 0 || int(t) >= m.Rows {
			b.fail(fmt.Errorf("embed: token %d outside vocabulary of %d", t, m.Rows))
			return
		}
		b.fail(quant.DequantizeRow(m, int(t), d[i*m.Cols:(i+1)*m.Cols]))
	}
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32, rows int) {
	d, s, g := f(dst), f(x), b.vector(w)
	n := len(g)
	b.pool.For(rows, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, out := s[r*n:(r+1)*n], d[r*n:(r+1)*n]
			var sum float64
			for _, v := range row {
				sum += float64(v) * float64(v)
			}
			scale := float32(1 / math.Sqrt(sum/float64(n)+float64(eps)))
			for i, v := range row {
				out[i] = v * scale * g[i]
			}
		}
	})
}

func (b *Backend) MatMul(dst backend.Tensor, w backend.Weight, x backend.Tensor, rows int) {
	b.fail(quant.MatMul(b.pool, f(dst), matrix(w), f(x), rows))
}

func (b *Backend) AddBias(x backend.Tensor, bias backend.Weight, rows int) {
	d, v := f(x), b.vector(bias)
	n := len(v)
	for r := 0; r < rows; r++ {
		row := d[r*n : (r+1)*n]
		for i := range row {
			row[i] += v[i]
		}
	}
}

func (b *Backend) RoPE(x backend.Tensor, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	d := f(x)
	half := r.Dims / 2
	freq := ropeFrequencies(r)
	mscale := ropeMagnitude(r)
	b.pool.For(rows, 1, func(lo, hi int) {
		cs := make([]float32, 2*half)
		for row := lo; row < hi; row++ {
			for i, w := range freq {
				s, c := math.Sincos(float64(pos[row]) * w)
				cs[2*i], cs[2*i+1] = float32(c), float32(s)
			}
			if mscale != 1 {
				for i := range cs {
					cs[i] *= mscale
				}
			}
			for h := 0; h < heads; h++ {
				v := d[(row*heads+h)*headDim:]
				for i := 0; i < half; i++ {
					c, s := cs[2*i], cs[2*i+1]
					a, bi := 2*i, 2*i+1
					if r.Neox {
						a, bi = i, i+half
					}
					x0, x1 := v[a], v[bi]
					v[a] = x0*c - x1*s
					v[bi] = x0*s + x1*c
				}
			}
		}
	})
}

// ropeFrequencies returns the angle per position of each rotated pair:
// scale·base^(-2i/dims)/factor_i (theta_i = pos·freq_i). With YaRN the
// pair's angle blends the interpolated one (scale·θ) and the extrapolated
// one (θ) by ggml's ramp: mix = ExtFactor·(1 − clamp((i − low)/(high −
// low), 0, 1)) over the correction dims [low, high] (yarnCorrDims), angle =
// θ·(scale·(1 − mix) + mix), as ggml's rope_yarn.
func ropeFrequencies(r *backend.RoPE) []float64 {
	scale := float64(r.PosScale)
	if scale == 0 {
		scale = 1
	}
	var low, high float64
	if r.ExtFactor != 0 {
		low, high = yarnCorrDims(r)
	}
	freq := make([]float64, r.Dims/2)
	for i := range freq {
		theta := math.Pow(float64(r.Base), -2*float64(i)/float64(r.Dims))
		if r.FreqFactors != nil {
			theta /= float64(r.FreqFactors[i])
		}
		freq[i] = scale * theta
		if r.ExtFactor != 0 {
			y := (float64(i) - low) / math.Max(0.001, high-low)
			mix := (1 - math.Min(1, math.Max(0, y))) * float64(r.ExtFactor)
			freq[i] = scale*theta*(1-mix) + theta*mix
		}
	}
	return freq
}

// ropeMagnitude is what cos and sin are multiplied by: AttnFactor (0 = 1),
// and with YaRN also 1 + 0.1·ln(1/PosScale) (ggml's rope_yarn mscale).
func ropeMagnitude(r *backend.RoPE) float32 {
	m := r.AttnFactor
	if m == 0 {
		m = 1
	}
	if r.ExtFactor != 0 && r.PosScale > 0 {
		m *= float32(1 + 0.1*math.Log(1/float64(r.PosScale)))
	}
	return m
}

// yarnCorrDims is ggml_rope_yarn_corr_dims: the pairs whose wavelength
// turns between BetaFast and BetaSlow times in OrigCtx positions, widened
// to whole pairs (floor, ceil) and clamped to [0, Dims−1]. Computed in
// float32 as ggml does, so the floor and ceil fall alike.
func yarnCorrDims(r *backend.RoPE) (low, high float64) {
	corrDim := func(rot float32) float32 {
		return float32(r.Dims) * log32(float32(r.OrigCtx)/(rot*2*math.Pi)) / (2 * log32(r.Base))
	}
	low = math.Max(0, math.Floor(float64(corrDim(r.BetaFast))))
	high = math.Min(float64(r.Dims-1), math.Ceil(float64(corrDim(r.BetaSlow))))
	return low, high
}

func log32(x float32) float32 { return float32(math.Log(float64(x))) }

func (b *Backend) KVSetSmoothing(c backend.KVCache, layer int, lambda []float32) {
	b.fail(c.(*kvCache).c.SetLambda(layer, lambda))
}

func (b *Backend) KVStore(c backend.KVCache, layer int, k, v backend.Tensor, pos, rows int) {
	b.fail(c.(*kvCache).c.Append(layer, pos, f(k), f(v), rows))
}

// AttendDecode and AttendPrefill take logical positions; on a cache that
// evicts they read its slots (kv.Cache.Physical) and, for H2O, add the
// attention to its scores (docs/ARCHITECTURE.md, "Eviction (H2O)").
func (b *Backend) AttendDecode(out, q backend.Tensor, c backend.KVCache, layer, n int, a *backend.Attention) {
	kc := c.(*kvCache)
	n, err := kc.physical(layer, n, a)
	if err != nil {
		b.fail(fmt.Errorf("attention decode: %w", err))
		return
	}
	b.fail(attention.DecodeAccumulate(b.pool, kc.workspace(layer), kc.scores, f(out), f(q), kc.c, layer, n, b.attnParams(a)))
}

func (b *Backend) AttendPrefill(out, q, k, v backend.Tensor, c backend.KVCache, layer, past, rows int, a *backend.Attention) {
	kc := c.(*kvCache)
	past, err := kc.physical(layer, past, a)
	if err != nil {
		b.fail(fmt.Errorf("attention prefill: %w", err))
		return
	}
	b.fail(attention.PrefillAccumulate(b.pool, kc.workspace(layer), kc.scores, f(out), f(q), f(k), f(v), rows, kc.c, layer, past, b.attnParams(a)))
}

// physical maps a logical position count to the cache's slots; an evicting
// cache refuses sliding-window attention, whose window is in positions.
func (k *kvCache) physical(layer, n int, a *backend.Attention) (int, error) {
	if !k.c.Evicts() {
		return n, nil
	}
	if a.Window > 0 {
		return 0, fmt.Errorf("a cache that evicts cannot serve sliding-window attention (window %d)", a.Window)
	}
	return k.c.Physical(layer, n)
}

// Evicted (backend.EvictingCache): the cache dropped positions since the
// sequence last started at position 0, by eviction or because a
// sliding-window ring overwrote them (kv.Cache.RingWrapped): not every
// shorter prefix can then be resumed (ResumableFrom says which).
func (k *kvCache) Evicted() bool { return k.c.Evicted() || k.c.RingWrapped() }

// ResumableFrom (backend.ResumingCache): where the sequence can go on,
// ring wraps and eviction considered (kv.Cache.ResumableFrom).
func (k *kvCache) ResumableFrom(n int) int { return k.c.ResumableFrom(n) }

// Kept lists the logical positions the layer's kv head holds, in order
// (backend.EvictingCache; nil when the cache does not evict).
func (k *kvCache) Kept(layer, kvh int) []int { return k.c.Kept(layer, kvh) }

func (b *Backend) SwiGLU(dst, gate, up backend.Tensor, n int) {
	d, g, u := f(dst), f(gate), f(up)
	b.pool.For(n, 4096, func(lo, hi int) { swiGLU(d[lo:hi], g[lo:hi], u[lo:hi]) })
}

func (b *Backend) Add(dst, x backend.Tensor, n int) {
	d, s := f(dst), f(x)
	for i := 0; i < n; i++ {
		d[i] += s[i]
	}
}

func (b *Backend) Copy(dst backend.Tensor, dstOff int, src backend.Tensor, srcOff, n int) {
	copy(f(dst)[dstOff:dstOff+n], f(src)[srcOff:srcOff+n])
}

// Argmax is sample.Greedy per row: strictly greater wins, so the first
// maximum, and NaN never.
func (b *Backend) Argmax(dst, x backend.Tensor, rows, n int) {
	d, s := f(dst), f(x)
	for r := 0; r < rows; r++ {
		best, bestV := 0, float32(math.Inf(-1))
		for i, v := range s[r*n : (r+1)*n] {
			if v > bestV {
				best, bestV = i, v
			}
		}
		d[r] = float32(best)
	}
}

func (b *Backend) Read(dst []float32, src backend.Tensor, off int) { copy(dst, f(src)[off:]) }

func (b *Backend) ReadKV(c backend.KVCache, layer int, k, v []byte) error {
	kc := c.(*kvCache)
	cfg := kc.c.Config()
	if layer < 0 || layer >= cfg.Layers {
		return fmt.Errorf("read kv: layer %d outside [0, %d)", layer, cfg.Layers)
	}
	lv := kc.c.Layer(layer)
	if len(k) != len(lv.K.Raw) || len(v) != len(lv.V.Raw) {
		return fmt.Errorf("read kv: planes are %d bytes, got buffers of %d and %d", len(lv.K.Raw), len(k), len(v))
	}
	copy(k, lv.K.Raw)
	copy(v, lv.V.Raw)
	return nil
}

func (b *Backend) Sync() error {
	b.mu.Lock()
	err := b.err
	b.err = nil
	b.mu.Unlock()
	return err
}

// Close stops the workers and releases the off-heap memory: tensors and
// caches of this backend must not be used afterwards.
func (b *Backend) Close() error {
	b.pool.Close()
	b.releaseAll()
	return nil
}
