package encoder

import (
	"encoding/binary"
	"math"

	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/metal/device"
)

// kvAppendThreads is the threadgroup of kernel_kv_append: 32 lanes hold one
// to four head vectors of up to 256 elements (8 a lane).
const kvAppendThreads = 256

// kvAppendLayout is how kernel_kv_append lays out vecs head vectors of d
// elements: vps whole vectors a simdgroup when d ≤ 256 (0: one thread per
// chunk of 8 across simdgroups) and the threads the grid needs.
func kvAppendLayout(vecs, d int) (vps, threads int) {
	chunks := d / 8
	if chunks > 32 {
		return 0, vecs * chunks
	}
	vps = 32 / chunks
	return vps, (vecs + vps - 1) / vps * 32
}

// KVSetSmoothing writes the layer's K smoothing factors λ (KVHeads·HeadDim
// powers of two, as kv.Cache.SetLambda takes them; nil: ones, smoothing
// off) into c.Lambda for the stores and attention encoded after it. The
// factors are copied now and reach c.Lambda in command order (an upload,
// then kernel_copy_f32), so dispatches encoded before still read the old
// ones. A cache that does not smooth checks λ and ignores it.
func (e *Encoder) KVSetSmoothing(c *KVLayer, lambda []float32) {
	if c == nil {
		e.Failf("kv smoothing: no cache layer")
		return
	}
	cfg := c.Cfg
	if lambda != nil {
		// kv.Cache's own check: length, powers of two within its range.
		if err := kv.CheckLambda(lambda, c.KVHeads(), c.HeadDim()); err != nil {
			e.Failf("%w", err)
			return
		}
	}
	n := c.LambdaFloats()
	if !cfg.Smooths() || c.Lambda.Len == 0 {
		c.Smoothed = false
		return
	}
	if c.Lambda.Len < 4*n {
		e.Failf("kv smoothing: λ of %d bytes, want %d", c.Lambda.Len, 4*n)
		return
	}
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		l := float32(1)
		if lambda != nil {
			l = lambda[i]
		}
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(l))
	}
	e.Copy(c.Lambda, 0, e.upload(b), 0, n)
	c.Smoothed = lambda != nil
}

// KVStore quantizes rows rows of k and v (KVHeads·HeadDim floats each,
// heads concatenated) into positions pos..pos+rows-1 of the layer, the
// bytes engine/kv's Cache.Append writes: K divided by λ (when c.Smoothed),
// then rotated (Cfg.Rotate, head dims up to MaxRotatedHeadDim), then quantized with
// scale and bias rounded to fp16 first.
//
// On a sliding-window layer position p goes to slot p mod Slots(), and
// only the last Slots() rows of a longer batch are stored.
//
// kernel_kv_append_{f16,q8,q4}: a thread per 8 elements, grid y 0 for K
// and 1 for V.
func (e *Encoder) KVStore(c *KVLayer, k, v Region, pos, rows int) {
	e.kvStore(c, k, v, pos, rows, nil)
}

// KVStoreRoPE is RoPE on k at positions pos, pos+1, ... (RoPE's contract)
// followed by KVStore, in one dispatch where RoPE is norm (pairs 2j, 2j+1:
// kernel_kv_append_* rotate each lane's chunk before the rest): there k is
// left as given and only the cache holds it rotated, for a K nothing else
// reads (a decode step's). NeoX's pairs span lanes: RoPE, then KVStore.
func (e *Encoder) KVStoreRoPE(c *KVLayer, k, v Region, pos, rows int, r *backend.RoPE) {
	if c == nil {
		e.Failf("kv store: no cache layer")
		return
	}
	if !e.ropeValid("kv store", c.KVHeads(), c.HeadDim(), rows, rows, r) {
		return
	}
	if pos < 0 || pos+rows > 1<<24 {
		// The kernel takes the position as a float: exact up to 2^24.
		e.Failf("kv store: RoPE positions [%d, %d)", pos, pos+rows)
		return
	}
	if r.Neox {
		positions := make([]int32, rows)
		for i := range positions {
			positions[i] = int32(pos + i)
		}
		e.RoPE(k, c.KVHeads(), c.HeadDim(), rows, positions, r)
		e.KVStore(c, k, v, pos, rows)
		return
	}
	e.kvStore(c, k, v, pos, rows, r)
}

func (e *Encoder) kvStore(c *KVLayer, k, v Region, pos, rows int, rope *backend.RoPE) {
	if c == nil {
		e.Failf("kv store: no cache layer")
		return
	}
	cfg := c.Cfg
	d, row := c.HeadDim(), c.KVHeads()*c.HeadDim()
	smooth := c.Smoothed && cfg.Smooths()
	switch {
	case cfg.Validate() != nil:
		e.Failf("kv store: %v", cfg.Validate())
		return
	case rows < 0 || pos < 0 || pos > cfg.Ctx-rows:
		e.Failf("kv store: positions [%d, %d) outside the context of %d", pos, pos+rows, cfg.Ctx)
		return
	case cfg.Rotate && !RotatesHeadDim(d):
		e.Failf("kv store: rotation of a head dim of %d (at most %d)", d, MaxRotatedHeadDim)
		return
	case c.K.Len < c.PlaneBytes() || c.V.Len < c.PlaneBytes():
		e.Failf("kv store: planes of %d and %d bytes, want %d", c.K.Len, c.V.Len, c.PlaneBytes())
		return
	case smooth && c.Lambda.Len < 4*row:
		e.Failf("kv store: λ of %d bytes, want %d", c.Lambda.Len, 4*row)
		return
	case !ewVec4(4, k, v, c.K, c.V):
		e.Failf("kv store: offsets %d, %d, %d and %d must be multiples of 16", k.Off, v.Off, c.K.Off, c.V.Off)
		return
	case !e.ewCheck("kv store", rows*row, k, v) || rows == 0:
		return
	}
	lambda, signs := k, k // bound but not read unless smoothing, rotating
	if smooth {
		lambda = c.Lambda
	}
	if cfg.Rotate {
		var ok bool
		if signs, ok = e.rotationConstants("kv store", d); !ok {
			return
		}
	}
	flag := func(b bool) uint32 {
		if b {
			return 1
		}
		return 0
	}
	c.span.Note(c.Ring(), pos, rows)
	ringFrom := c.storeTail(pos, rows)
	if slots := c.Slots(); rows > slots {
		// A ring keeps only the last slots rows of a longer batch: the
		// others would be overwritten within it. (Rows are 32-byte
		// multiples, so the offsets stay 16-byte aligned.)
		skip := rows - slots
		k, v = k.Sub(4*skip*row, 4*slots*row), v.Sub(4*skip*row, 4*slots*row)
		pos, rows, ringFrom = pos+skip, slots, ringFrom-skip
	}
	n := rows * row / 8
	vps, threads := kvAppendLayout(rows*c.KVHeads(), d)
	a := KVAppendArgs{D: u32(d), GS: u32(cfg.GroupSize), KVHeads: u32(c.KVHeads()), Ctx: u32(c.Slots()), Pos: u32(pos), N: u32(n),
		Smooth: flag(smooth), Rotate: flag(cfg.Rotate), Norm: rotationNorm(d), VPS: u32(vps), Window: u32(c.Residual()),
		RingFrom: u32(ringFrom), Meta: uint64(c.CodesBytes()), Ring: uint64(c.RingOffset()), RopeMScale: 1}
	freq := k // bound but not read without RoPE
	if rope != nil {
		a.RopePairs, a.RopeMScale, freq = u32(rope.Dims/2), ropeMScale(rope), e.ropeFreqs(rope)
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_kv_append_" + cfg.Type.String()),
		Groups:   [3]int{(threads + kvAppendThreads - 1) / kvAppendThreads, 2, 1},
		Threads:  [3]int{kvAppendThreads, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: a.Bytes()}},
		Buffers:  []device.Binding{k.bind(1), v.bind(2), lambda.bind(3), signs.bind(4), c.K.bind(5), c.V.bind(6), freq.bind(7)},
	})
}
