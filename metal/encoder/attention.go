package encoder

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/metal/device"
)

// Attention (metal/shaders/attention.metal): decode as two passes over
// (kv head, split) threadgroups and a merge per query head; prefill as a
// staging dispatch (new K/V rows through f16) and one threadgroup per
// (kv head, row).

const (
	attnThreads = 256 // 8 simdgroups (ATTN_NSG)
	attnBlock   = 64  // tokens per simdgroup block (ATTN_BT: 2 per lane)
	// attnMaxHG is the most query heads one threadgroup serves (ATTN_MAXH).
	// At GQA 8, two threadgroups of 4 heads were 20% faster in a CUDA port
	// on an H200 (its 50 MB L2 absorbs the second read of K/V), but they
	// double the DRAM traffic wherever the cache is small: K/V stay read
	// once per group.
	attnMaxHG     = 8
	attnMaxD      = 512 // largest head dim (ATTN_MAXD)
	attnMaxGroups = 16  // metadata groups a head (ATTN_MAXG)
	// attnWideD: past this head dim a lane takes two words of a token in V
	// and a threadgroup serves at most attnMaxHG/2 query heads (their
	// accumulators fill the state of attnMaxHG).
	attnWideD     = 256
	attnMinChunk  = 256 // fewest tokens a split owns
	attnTargetTGs = 256 // pass 1 threadgroups to aim for: several per GPU core
	attnMaxSplits = 64  // most splits per kv head (the workspace holds this many)
	log2e         = 1.4426950408889634
)

// Function constant indices (attention.metal).
const (
	fcAttnD = 100 + iota
	fcAttnGS
	fcAttnHG
	fcAttnSmooth
	fcAttnRotate
	fcAttnScores
	fcAttnSoftcap
	fcAttnSinks
)

// attnMaxSplitsFor is the split count the workspace of a cache of ctx
// positions is sized for.
func attnMaxSplitsFor(ctx int) int { return max(1, min(ctx/attnMinChunk, attnMaxSplits)) }

// WorkspaceBytes is the attention workspace a cache of cfg needs for heads
// query heads and prefill batches of up to maxBatch rows: the split
// partials (o, then {m, l}, per query head and split) and the staged new
// K and V rows of a prefill batch as halves. The workspace and the K and V
// planes must start 16-byte aligned (the kernels read them 16 bytes at a
// time).
func WorkspaceBytes(cfg kv.Config, heads, maxBatch int) int {
	part, staged := attnLayout(cfg, heads, maxBatch)
	return part + staged
}

// attnLayout: the partials from 0, the staging from part, sized for the
// widest layer (the layers' dispatches run in order and share them).
func attnLayout(cfg kv.Config, heads, maxBatch int) (part, staged int) {
	s := attnMaxSplitsFor(cfg.Ctx)
	d, row := 0, 0
	for l := range max(cfg.Layers, 1) {
		c := KVLayer{Cfg: cfg, Layer: l}
		d, row = max(d, c.HeadDim()), max(row, c.KVHeads()*c.HeadDim())
	}
	part = s * heads * (d + 2) * 4
	staged = 2 * max(0, maxBatch) * row * 2
	return (part + 15) &^ 15, (staged + 15) &^ 15
}

// attnHeadsPerGroup is the query heads one threadgroup serves for head dim
// d: the largest divisor of G up to attnMaxHG, or half that past attnWideD
// (G > 8 reads the group's K/V G/hg times).
func attnHeadsPerGroup(g, d int) int {
	most := attnMaxHG
	if d > attnWideD {
		most /= 2
	}
	for hg := min(g, most); hg > 1; hg-- {
		if g%hg == 0 {
			return hg
		}
	}
	return 1
}

// attnSplits picks the split count for nTok tokens and kvTGs threadgroups
// per split: chunks of at least attnMinChunk tokens, about target
// threadgroups in all, at most what the workspace holds; the chunk is
// then rounded up to whole blocks of attnBlock tokens (and the count to
// what those chunks need), so that every simdgroup's blocks are full.
func attnSplits(nTok, kvTGs, maxSplits, target int) int {
	s := max(1, min(nTok/attnMinChunk, (target+kvTGs-1)/kvTGs, maxSplits))
	chunk := attnChunk(nTok, s)
	return max(1, (nTok+chunk-1)/chunk)
}

// attnChunk is the positions a split owns when nTok positions are cut in
// splits splits: whole blocks of attnBlock tokens.
func attnChunk(nTok, splits int) int {
	return ((nTok+splits-1)/splits + attnBlock - 1) / attnBlock * attnBlock
}

// attnTGsPerCore is how many pass-1 threadgroups decode aims for per GPU
// core when the device says how many cores it has: two resident
// threadgroups of 8 simdgroups a core (the register state of 8 heads a
// lane allows no more on an H200 SM; an Apple GPU core holds as many), a
// single wave, so that no core idles through a second, partial one.
const attnTGsPerCore = 2

// attnTarget is the pass-1 threadgroups to aim for on a GPU of cores cores
// (0: unknown, attnTargetTGs).
func attnTarget(cores int) int {
	if cores <= 0 {
		return attnTargetTGs
	}
	return attnTGsPerCore * cores
}

// DecodeGrid is how AttendDecode lays out decode attention for heads query
// heads of dim d over kvHeads kv heads, n visible positions of a cache of
// ctx, on a GPU whose core count is unknown: hg query heads a threadgroup
// and splits splits per (kv head, head chunk). metal/traffic's model of the
// kernels' traffic follows the same layout.
func DecodeGrid(heads, kvHeads, d, n, ctx int) (hg, splits int) {
	return DecodeGridFor(0, heads, kvHeads, d, n, ctx)
}

// DecodeGridFor is DecodeGrid on a GPU of cores cores (the device's
// device.Cores; 0 when it does not say): the splits fill one wave of
// attnTGsPerCore threadgroups a core, with chunks of at least
// attnMinChunk positions, so that a long sequence on a small GPU gives each
// simdgroup many blocks per split and a short one on a large GPU many
// splits.
func DecodeGridFor(cores, heads, kvHeads, d, n, ctx int) (hg, splits int) {
	hg = attnHeadsPerGroup(heads/kvHeads, d)
	return hg, attnSplits(n, kvHeads*(heads/kvHeads/hg), attnMaxSplitsFor(ctx), attnTarget(cores))
}

// rotationConstants returns what the kernels rotate K and queries with for
// head dim d, as float32s uploaded once per encoder: kv.Rotation's d signs,
// then for d = P·m with m > 1 its block mixing Q_m (m·m, row-major); false
// (and the error recorded) when d has no rotation: kv.Rotation's signs,
// then its Q_m.
func (e *Encoder) rotationConstants(op string, d int) (Region, bool) {
	e.key = binary.LittleEndian.AppendUint32(append(e.key[:0], 's'), uint32(d))
	r := e.constant(e.key, func() ([]byte, error) {
		x, err := RotationConstants(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		b := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b, nil
	})
	return r, r.Buf != nil
}

// RotationConstants is the buffer rotationConstants uploads for head dim d:
// d signs, then Q_m when m > 1.
func RotationConstants(d int) ([]float32, error) {
	r, err := kv.NewRotation(d)
	if err != nil {
		return nil, err
	}
	return append(slices.Clone(r.Signs()), r.Mixing()...), nil
}

// rotationNorm is the rotation's Walsh–Hadamard scale for head dim d,
// 1/√P (P the largest power of two dividing d), as kv.Rotation rounds it.
func rotationNorm(d int) float32 { return float32(1 / math.Sqrt(float64(d&-d))) }

// MaxRotatedHeadDim is the largest head dim the kernels rotate: the
// butterflies and block mixing of kernel_kv_append run across the lanes of
// one simdgroup, 32 lanes of 8 elements.
const MaxRotatedHeadDim = 256

// RotatesHeadDim says whether the kernels store and read K rotated for head
// dim d: kv.Rotation's dims (multiples of 8) up to MaxRotatedHeadDim.
func RotatesHeadDim(d int) bool { return d > 0 && d%8 == 0 && d <= MaxRotatedHeadDim }

// attnCheck reports (through Failf) what breaks the attention contract;
// it returns the query heads per threadgroup.
func (e *Encoder) attnCheck(op string, c *KVLayer, a *backend.Attention) (hg int, ok bool) {
	if c == nil || a == nil {
		e.Failf("%s: nil cache or attention", op)
		return 0, false
	}
	cfg := c.Cfg
	d := a.HeadDim
	switch {
	case a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0:
		e.Failf("%s: %d heads not a multiple of %d kv heads", op, a.Heads, a.KVHeads)
	case a.KVHeads != c.KVHeads() || d != c.HeadDim():
		e.Failf("%s: %d kv heads of dim %d, the cache's layer %d has %d of dim %d", op, a.KVHeads, d, c.Layer, c.KVHeads(), c.HeadDim())
	case d <= 0 || d%8 != 0 || d > attnMaxD || d > attnWideD && d%16 != 0:
		e.Failf("%s: head dim %d (the kernels take multiples of 8 up to %d, of 16 up to %d)", op, d, attnWideD, attnMaxD)
	case cfg.Type != kv.F16 && cfg.GroupSize != 32 && cfg.GroupSize != 64:
		e.Failf("%s: group size %d", op, cfg.GroupSize)
	case !(a.Scale > 0) || math.IsInf(float64(a.Scale), 0):
		e.Failf("%s: scale %g must be positive and finite", op, a.Scale)
	case !(a.Softcap >= 0) || math.IsInf(float64(a.Softcap), 0):
		e.Failf("%s: soft-cap %g must be finite and ≥ 0", op, a.Softcap)
	case a.Window < 0:
		e.Failf("%s: negative window %d", op, a.Window)
	case c.Ring() > 0 && (a.Window == 0 || a.Window > c.Ring()):
		// The ring keeps only the last Ring() positions.
		e.Failf("%s: attention window %d on a sliding-window layer's ring of %d slots", op, a.Window, c.Ring())
	case c.K.Len < c.PlaneBytes() || c.V.Len < c.PlaneBytes():
		e.Failf("%s: K and V planes of %d and %d bytes, the cache needs %d", op, c.K.Len, c.V.Len, c.PlaneBytes())
	case c.K.Off%16 != 0 || c.V.Off%16 != 0:
		e.Failf("%s: K and V planes must start 16-byte aligned (offsets %d, %d)", op, c.K.Off, c.V.Off)
	case attnSmooths(c) && c.Lambda.Len < 4*c.LambdaFloats():
		e.Failf("%s: λ of %d bytes, want %d", op, c.Lambda.Len, 4*c.LambdaFloats())
	default:
		return attnHeadsPerGroup(a.Heads/a.KVHeads, d), true
	}
	return 0, false
}

// attnSmooths says whether queries meet K as q∘λ: factors set on a cache
// that smooths (an f16 cache ignores them, as the CPU's does).
func attnSmooths(c *KVLayer) bool { return c.Smoothed && c.Lambda.Len > 0 && c.Cfg.Smooths() }

// attnConsts are the function constants of every attention kernel; a's
// soft-cap becomes c·log2(e) (0: none), the domain of the kernels' scores.
func attnConsts(c *KVLayer, a *backend.Attention, hg int, scores bool) []device.Constant {
	gs := c.Cfg.GroupSize
	if c.Cfg.Type == kv.F16 || gs == 0 {
		gs = 32 // unused: f16 has no groups
	}
	return []device.Constant{
		{Index: fcAttnD, Value: uint32(c.HeadDim())},
		{Index: fcAttnGS, Value: uint32(gs)},
		{Index: fcAttnHG, Value: uint32(hg)},
		{Index: fcAttnSmooth, Value: attnSmooths(c)},
		{Index: fcAttnRotate, Value: c.Cfg.Rotate},
		{Index: fcAttnScores, Value: scores},
		{Index: fcAttnSoftcap, Value: float32(float64(a.Softcap) * log2e)},
		{Index: fcAttnSinks, Value: a.Sinks != nil},
	}
}

// attnSinks is the span of a's sinks (one F32 logit per query head), or an
// unused binding (the cache's K plane) when a has none; false, with the
// error recorded, when they are not a weight the kernels can read.
func (e *Encoder) attnSinks(op string, c *KVLayer, a *backend.Attention) (Region, bool) {
	if a.Sinks == nil {
		return c.K, true
	}
	dw, ok := a.Sinks.(DeviceWeight)
	if !ok {
		e.Failf("%s: sinks of type %T, not a device weight", op, a.Sinks)
		return Region{}, false
	}
	w := dw.DeviceWeight()
	if w.Type != ggml.F32 || w.Rows*w.Cols != a.Heads || w.Buf == nil || w.Len < 4*a.Heads || w.Off%4 != 0 {
		e.Failf("%s: sinks of %d×%d %s (%d bytes at offset %d), want %d F32 logits, one per query head",
			op, w.Rows, w.Cols, w.Type, w.Len, w.Off, a.Heads)
		return Region{}, false
	}
	return w.Region, true
}

// setRing sets the residual window's part of a: positions [tail, end) of
// a read that ends at end are in the ring (tail = end: none).
func (a *AttnArgs) setRing(c *KVLayer, tail int) {
	a.Tail, a.RingRows, a.Ring = u32(tail), u32(c.Residual()), uint64(c.RingOffset())
}

// attnPlanes binds K codes, K metadata, V codes, V metadata, λ and the
// rotation signs at buffer(2..7), the layout both decode and prefill take.
func (e *Encoder) attnPlanes(c *KVLayer) []device.Binding {
	meta := c.CodesBytes()
	km, vm := c.K.Sub(meta, 0), c.V.Sub(meta, 0)
	if c.Cfg.Type == kv.F16 {
		km, vm = c.K, c.V // unused
	}
	lambda := c.Lambda
	if !attnSmooths(c) {
		lambda = c.K // unused
	}
	signs := c.K // unused
	if c.Cfg.Rotate {
		signs, _ = e.rotationConstants("attention", c.HeadDim())
	}
	return []device.Binding{c.K.bind(2), km.bind(3), c.V.bind(4), vm.bind(5), lambda.bind(6), signs.bind(7)}
}

// Decode with the matrix units (kernel_attn_decode_mma_<kv>): ATTN_MMA_NSG
// simdgroups of ATTN_MMA_BT-token blocks, K and V dequantized a slab of
// attnMMASlab(d) elements at a time.
const (
	attnMMAThreads = 128 // 4 simdgroups (ATTN_MMA_NSG)
	attnMMABlock   = 32  // tokens per simdgroup block (ATTN_MMA_BT)
	attnMMARows    = 8   // query heads as matrix rows (ATTN_MMA_ROWS)
)

// attnMMASlab is ATTN_MMA_SLAB: the elements of a token dequantized at a
// time.
func attnMMASlab(d int) int {
	switch {
	case d > attnWideD:
		return 16
	case d%32 == 0:
		return 32
	case d%16 == 0:
		return 16
	}
	return 8
}

// attnMMASharedBytes is kernel_attn_decode_mma's [[threadgroup(0)]]
// memory: the 8 query rows, then per simdgroup its stage (of halves with
// half operands), scores, diagonal and {m, l}.
func attnMMASharedBytes(d int, half bool) int {
	const nsg = attnMMAThreads / 32
	stage := attnMMABlock * attnMMASlab(d)
	if half {
		stage /= 2
	}
	floats := attnMMARows*d + nsg*(stage+attnMMARows*attnMMABlock+64+2*attnMMARows)
	return (4*floats + 15) &^ 15
}

// AttnKernel is which pass 1 decode attention runs.
type AttnKernel int

const (
	// AttnScalar: kernel_attn_decode_<kv>, scalar multiply-adds (the
	// default: the fastest measured, 406.6 µs for a Llama-3.1-70B layer at
	// 128K q4 on an H200 through the CUDA shim, against 1199 µs for
	// AttnMatrixHalf and 2103 µs for AttnMatrix there).
	AttnScalar AttnKernel = iota
	// AttnMatrix: kernel_attn_decode_mma_<kv>, simdgroup matrices with
	// float operands (the CPU's results to float rounding).
	AttnMatrix
	// AttnMatrixHalf: kernel_attn_decode_mmah_<kv>, half operands (q', K, V
	// and p rounded to f16, float sums; tensor cores on an NVIDIA GPU).
	AttnMatrixHalf
)

// SetAttnKernel picks decode attention's pass 1 for the dispatches encoded
// after it. Which is fastest on Apple's GPUs is still to be measured on a
// Mac: their simdgroup matrices are native, the CUDA shim's float products
// are shuffles.
func (e *Encoder) SetAttnKernel(k AttnKernel) { e.attnKernel = k }

// attnSharedBytes is the [[threadgroup(0)]] memory of decode and prefill
// (attention.metal): queries, Σq' per group, probabilities, and the
// simdgroups' merge.
func attnSharedBytes(hg, d int) int {
	const nsg = attnThreads / 32
	floats := hg*d + hg*attnMaxGroups + max(nsg*hg*attnBlock, nsg*d) + 2*nsg
	return (4*floats + 15) &^ 15
}

func attnKernel(op string, t kv.Type) string { return "kernel_attn_" + op + "_" + t.String() }

// AttendDecode follows backend.Backend's AttendDecode: the query row q
// (Heads·HeadDim floats) against the cached positions
// [max(0, n-Window), n) of c, into out (a sliding-window layer's at their
// ring slots); ws is the workspace of WorkspaceBytes. The positions the residual window's ring holds
// (c.TailStart) are read from it, the others from their codes, in the
// same pass. a.Sinks (an encoder.DeviceWeight of Heads F32 logits, or
// nil) join each head's softmax in the merge.
func (e *Encoder) AttendDecode(out, q Region, c *KVLayer, n int, a *backend.Attention, ws Region) {
	e.attendDecode(out, q, c, n, a, ws, Region{}, 0)
}

// AttendDecodeScores is AttendDecode that also writes each query head's
// raw scores q·k·scale of the visible positions p into scores at
// [head·stride + p] (floats; stride at least n), for an eviction policy.
// Positions outside the window are not written.
func (e *Encoder) AttendDecodeScores(out, q Region, c *KVLayer, n int, a *backend.Attention, ws, scores Region, stride int) {
	if stride < n || a == nil || scores.Len < 4*((a.Heads-1)*stride+n) {
		e.Failf("attention decode: scores of %d bytes at stride %d for %d positions", scores.Len, stride, n)
		return
	}
	e.attendDecode(out, q, c, n, a, ws, scores, stride)
}

func (e *Encoder) attendDecode(out, q Region, c *KVLayer, n int, a *backend.Attention, ws, scores Region, stride int) {
	hg, ok := e.attnCheck("attention decode", c, a)
	if !ok {
		return
	}
	sinks, ok := e.attnSinks("attention decode", c, a)
	if !ok {
		return
	}
	d, width := a.HeadDim, a.Heads*a.HeadDim
	part, _ := attnLayout(c.Cfg, a.Heads, 0)
	switch {
	case n < 1 || n > c.Cfg.Ctx:
		e.Failf("attention decode: %d positions outside [1, %d]", n, c.Cfg.Ctx)
		return
	case q.Len < 4*width || out.Len < 4*width:
		e.Failf("attention decode: q and out need %d floats, have %d and %d bytes", width, q.Len, out.Len)
		return
	case ws.Len < part || ws.Off%16 != 0:
		e.Failf("attention decode: workspace of %d bytes at offset %d, want %d, 16-byte aligned", ws.Len, ws.Off, part)
		return
	}
	lo := 0
	if a.Window > 0 {
		lo = max(0, n-a.Window)
	}
	g := a.Heads / a.KVHeads
	chunks := g / hg
	_, s := DecodeGridFor(e.cores, a.Heads, a.KVHeads, d, n-lo, c.Cfg.Ctx)
	maxS := attnMaxSplitsFor(c.Cfg.Ctx)
	chunk := attnChunk(n-lo, s)
	args := AttnArgs{Heads: u32(a.Heads), Group: u32(g), Chunks: u32(chunks), Ctx: u32(c.Slots()), Lo: u32(lo), N: u32(n),
		Chunk: u32(chunk), Splits: u32(s), Window: u32(a.Window), KVHeads: u32(a.KVHeads), QScale: a.Scale * log2e, Norm: rotationNorm(d)}
	args.setRing(c, c.TailStart(lo, n))
	export := scores.Buf != nil
	if export {
		args.ScoreStride = u32(stride)
	}
	partO := ws.Sub(0, s*a.Heads*d*4)
	partML := ws.Sub(maxS*a.Heads*d*4, s*a.Heads*2*4)
	sc := partO
	if export {
		sc = scores
	}
	consts, inline := attnConsts(c, a, hg, export), []device.Inline{{Index: 0, Data: args.Bytes()}}
	bind := append([]device.Binding{q.bind(1)}, e.attnPlanes(c)...)
	bind = append(bind, partO.bind(8), partML.bind(9), sc.bind(10))
	pass1 := device.Dispatch{
		Pipeline: e.pipeline(attnKernel("decode", c.Cfg.Type), consts...),
		Groups:   [3]int{a.KVHeads * chunks, s, 1}, Threads: [3]int{attnThreads, 1, 1},
		Buffers: bind, Inline: inline,
		Threadgroup: []int{attnSharedBytes(hg, d)},
	}
	if e.attnKernel == AttnMatrix || e.attnKernel == AttnMatrixHalf {
		half := e.attnKernel == AttnMatrixHalf
		kernel := "decode_mma"
		if half {
			kernel = "decode_mmah"
		}
		pass1.Pipeline = e.pipeline(attnKernel(kernel, c.Cfg.Type), consts...)
		pass1.Threads = [3]int{attnMMAThreads, 1, 1}
		pass1.Threadgroup = []int{attnMMASharedBytes(d, half)}
	}
	e.dispatch(pass1)
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_attn_merge_f32", attnConsts(c, a, hg, false)...),
		Groups:   [3]int{a.Heads, 1, 1}, Threads: [3]int{min(d, attnThreads), 1, 1},
		Buffers: []device.Binding{partO.bind(1), partML.bind(2), out.bind(3), sinks.bind(4)},
		Inline:  inline,
	})
}

// AttendPrefill follows backend.Backend's AttendPrefill: rows query rows
// of q at positions past..past+rows-1, row i against the cached prefix in
// its window and new rows 0..i of k and v (rows×KVHeads·HeadDim floats)
// rounded through f16; ws is the workspace of WorkspaceBytes for at least
// rows rows. The prefix's positions the residual window's ring holds are
// read from it. a.Sinks, as for AttendDecode, join each row's softmax at
// its end. The caller stores k and v (KVStore) afterwards.
func (e *Encoder) AttendPrefill(out, q, k, v Region, c *KVLayer, past, rows int, a *backend.Attention, ws Region) {
	hg, ok := e.attnCheck("attention prefill", c, a)
	if !ok {
		return
	}
	sinks, ok := e.attnSinks("attention prefill", c, a)
	if !ok {
		return
	}
	d := a.HeadDim
	qw, kw := a.Heads*d, a.KVHeads*d
	part, _ := attnLayout(c.Cfg, a.Heads, 0)
	stagedBytes := rows * kw * 2
	switch {
	case rows < 0 || past < 0 || past+rows > c.Cfg.Ctx:
		e.Failf("attention prefill: positions [%d, %d) outside the context of %d", past, past+rows, c.Cfg.Ctx)
		return
	case q.Len < 4*rows*qw || out.Len < 4*rows*qw:
		e.Failf("attention prefill: q and out need %d floats, have %d and %d bytes", rows*qw, q.Len, out.Len)
		return
	case k.Len < 4*rows*kw || v.Len < 4*rows*kw:
		e.Failf("attention prefill: k and v need %d floats, have %d and %d bytes", rows*kw, k.Len, v.Len)
		return
	case ws.Len < part+2*stagedBytes || ws.Off%16 != 0:
		e.Failf("attention prefill: workspace of %d bytes at offset %d, want %d for %d rows, 16-byte aligned", ws.Len, ws.Off, part+2*stagedBytes, rows)
		return
	}
	if rows == 0 {
		return
	}
	g := a.Heads / a.KVHeads
	chunks := g / hg
	args := AttnArgs{Heads: u32(a.Heads), Group: u32(g), Chunks: u32(chunks), Ctx: u32(c.Slots()), Lo: u32(past), N: u32(rows),
		Window: u32(a.Window), KVHeads: u32(a.KVHeads), QScale: a.Scale * log2e, Norm: rotationNorm(d)}
	args.setRing(c, c.TailStart(0, past))
	sk, sv := ws.Sub(part, stagedBytes), ws.Sub(part+stagedBytes, stagedBytes)
	consts, inline := attnConsts(c, a, hg, false), []device.Inline{{Index: 0, Data: args.Bytes()}}
	planes := e.attnPlanes(c)
	// Stage: λ and signs at buffer(3, 4).
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline("kernel_attn_stage_f32", consts...),
		Groups:   [3]int{rows, a.KVHeads, 1}, Threads: [3]int{d, 1, 1},
		Buffers: []device.Binding{k.bind(1), v.bind(2), rebind(planes[4], 3), rebind(planes[5], 4), sk.bind(5), sv.bind(6)},
		Inline:  inline,
	})
	bind := append([]device.Binding{q.bind(1)}, planes...)
	bind = append(bind, sk.bind(8), sv.bind(9), out.bind(10), sinks.bind(11))
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(attnKernel("prefill", c.Cfg.Type), consts...),
		Groups:   [3]int{a.KVHeads * chunks, rows, 1}, Threads: [3]int{attnThreads, 1, 1},
		Buffers: bind, Inline: inline,
		Threadgroup: []int{attnSharedBytes(hg, d)},
	})
}

func rebind(b device.Binding, index int) device.Binding {
	b.Index = index
	return b
}
