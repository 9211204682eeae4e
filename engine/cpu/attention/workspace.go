package attention

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// Workspace holds everything Decode and Prefill write besides their output:
// the split-K partials (o, m, l per query head per split), per-worker
// scratch and prefill's staged new rows. It is allocated once for one
// geometry (heads, kv heads, head dim); the scale and window come with each
// call. Steps do not allocate. One step at a time: a workspace is not for
// concurrent use.
type Workspace struct {
	p         Params
	ctx       int
	maxBatch  int
	maxSplits int
	err       error // invalid construction, reported by every call

	slots  []slot
	partO  []float32 // [kv head][split][G][D], kernel lane order
	partML []float32 // [kv head][split][G]{m, l}
	newK   []float32 // prefill: new K rows through f16, [kv head][row][D], lane order
	newV   []float32

	// The running task, read by the persistent worker closure so a step
	// allocates no closures.
	task                                          func(st *slot, item int)
	items                                         int
	next                                          atomic.Int64
	worker                                        func(lo, hi int)
	job                                           job
	decodeTask, mergeTask, stageTask, prefillTask func(st *slot, item int)
	prepareTask, columnTask                       func(st *slot, item int)
}

// job is the arguments of the step in progress.
type job struct {
	p        Params // this call's: scale and window may differ from call to call
	lv       *kv.LayerView
	out, q   []float32
	k, v     []float32 // prefill: new rows, element order
	n, lo    int       // decode: keys [lo, n)
	tail     int       // first cached position read from the residual window's f16 ring
	splits   int
	chunk    int
	rows     int
	past     int
	permuted bool
	scores   []float32 // decode: score export ([query head][stride]); nil: off
	stride   int
	column   columnJob // prefill's score pass for an evicting cache (evict.go)
}

// slot is one worker's scratch for one GQA group (G query heads).
type slot struct {
	g, d, ms  int
	q         []float32 // G×D prepared query: scale·log2(e)·q, lane order
	qsI       []float32 // G×ms: per group Σq' at odd lanes, matching the metadata layout
	o         []float32 // G×D accumulator, lane order: ownO or a split's partial
	ml        []float32 // G×{m, l}: ownML or a split's partial
	ownO      []float32
	ownML     []float32
	sc        []float32 // G×32 scores, then probabilities
	metaK     []float32 // 32×ms block metadata as floats: {scale, bias} per group, zero padded
	metaV     []float32
	nbuf      []float32 // one unpacked head vector (portable kernels)
	vbuf      []float32 // 32×D: a block of V as floats (SIMD kernels)
	wbuf      []float32 // G×33×ms: per head p·{scale, bias} per token, then their sums (SIMD)
	gather    []float32 // 32×D halves' room: a block of codes and metadata a ring's wrap splits, made contiguous
	qFor      int       // decode: the kv head whose query q holds this step; -1: none
	softcap   float32   // this call's Params.Softcap
	exp       []float32 // decode score export from this group's first head on ([G][expStride]); nil: off
	expStride int
}

// metaStride is the floats of converted metadata per token: 2 per group,
// padded to whole 8-lane vectors. Sized for the smallest group (32).
func metaStride(d int) int { return (max(8, d/16) + 7) &^ 7 }

// pad16 rounds a float count up to a 64-byte cache line.
func pad16(n int) int { return (n + 15) &^ 15 }

func slotFloats(p Params) int {
	g, d, ms := p.group(), p.HeadDim, metaStride(p.HeadDim)
	return pad16(g*d) + pad16(g*ms) + pad16(g*d) + pad16(2*g) + pad16(g*blockTokens) + 2*pad16(blockTokens*ms) + pad16(d) +
		pad16(blockTokens*d) + pad16(g*(blockTokens+1)*ms) + pad16(blockTokens*d/2)
}

func maxSplits(ctx, threads int) int {
	return max(1, min(ctx/minChunk, splitsPerThread*threads))
}

// splitCount picks S for nTok tokens: chunks of at least minChunk tokens, a
// multiple of the thread count when there are enough tokens for that.
func (ws *Workspace) splitCount(nTok, threads int) int {
	s := nTok / minChunk
	if s >= threads {
		s = min(s, splitsPerThread*threads) / threads * threads
	}
	return max(1, min(s, ws.maxSplits))
}

// layout returns the float counts of each region; total is their sum.
func layout(p Params, ctx, maxBatch, threads int) (slots, part, partML, staged int64) {
	threads = max(1, threads)
	s := int64(maxSplits(ctx, threads))
	slots = int64(threads) * int64(slotFloats(p))
	part = s * int64(p.Heads) * int64(p.HeadDim)
	partML = s * int64(p.Heads) * 2
	staged = int64(max(0, maxBatch)) * int64(p.KVHeads) * int64(p.HeadDim)
	return
}

// WorkspaceBytes is exactly what NewWorkspace allocates for these arguments
// (0 for invalid params).
func WorkspaceBytes(p Params, ctx, maxBatch, threads int) int64 {
	if p.validate() != nil {
		return 0
	}
	slots, part, partML, staged := layout(p, ctx, maxBatch, threads)
	return 4 * (slots + part + partML + 2*staged)
}

// NewWorkspace allocates a workspace for p's geometry (its Scale and Window
// are not kept: each call brings its own) through alloc (nil: make), for
// contexts up to ctx positions, prefill batches up to maxBatch rows and
// pools up to threads workers. Invalid arguments give a workspace whose
// every use returns the error.
func NewWorkspace(p Params, ctx, maxBatch, threads int, alloc func(nbytes int) []byte) *Workspace {
	ws := &Workspace{p: p, ctx: ctx, maxBatch: maxBatch, maxSplits: maxSplits(ctx, max(1, threads))}
	ws.worker = ws.runSlots
	ws.decodeTask, ws.mergeTask = ws.decodeItem, ws.mergeHead
	ws.stageTask, ws.prefillTask = ws.stageRow, ws.prefillItem
	ws.prepareTask, ws.columnTask = ws.prepareRow, ws.columnItem
	if err := p.validate(); err != nil {
		ws.err = err
		return ws
	}
	if ctx <= 0 || maxBatch < 0 {
		ws.err = fmt.Errorf("attention: workspace context %d and batch %d must be positive", ctx, maxBatch)
		return ws
	}
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	nbytes := WorkspaceBytes(p, ctx, maxBatch, threads)
	raw := alloc(int(nbytes))
	if int64(len(raw)) != nbytes || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 != 0 {
		ws.err = fmt.Errorf("attention: allocator returned %d bytes (want %d, 4-byte aligned)", len(raw), nbytes)
		return ws
	}
	var all []float32
	if nbytes > 0 {
		all = unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), nbytes/4)
	}
	take := func(n int64) []float32 {
		s := all[:n:n]
		all = all[n:]
		return s
	}
	nslots, part, partML, staged := layout(p, ctx, maxBatch, threads)
	ws.partO, ws.partML = take(part), take(partML)
	ws.newK, ws.newV = take(staged), take(staged)
	g, d, ms := p.group(), p.HeadDim, metaStride(p.HeadDim)
	ws.slots = make([]slot, nslots/int64(slotFloats(p)))
	for i := range ws.slots {
		region := take(int64(slotFloats(p)))
		cut := func(n int) []float32 {
			s := region[:n:n]
			region = region[pad16(n):]
			return s
		}
		ws.slots[i] = slot{g: g, d: d, ms: ms,
			q: cut(g * d), qsI: cut(g * ms), ownO: cut(g * d), ownML: cut(2 * g), sc: cut(g * blockTokens),
			metaK: cut(blockTokens * ms), metaV: cut(blockTokens * ms), nbuf: cut(d),
			vbuf: cut(blockTokens * d), wbuf: cut(g * (blockTokens + 1) * ms), gather: cut(blockTokens * d / 2)}
		ws.slots[i].o, ws.slots[i].ml = ws.slots[i].ownO, ws.slots[i].ownML
	}
	return ws
}

// run executes task(st, item) for item in [0, items) on the pool, each
// worker claiming items with its own slot.
func (ws *Workspace) run(pool *parallel.Pool, items int, task func(st *slot, item int)) {
	ws.task, ws.items = task, items
	ws.next.Store(0)
	pool.For(min(len(ws.slots), pool.Threads(), items), 1, ws.worker)
	ws.task = nil
}

func (ws *Workspace) runSlots(lo, hi int) {
	for s := lo; s < hi; s++ {
		st := &ws.slots[s]
		for {
			i := int(ws.next.Add(1)) - 1
			if i >= ws.items {
				break
			}
			ws.task(st, i)
		}
	}
}

// check reports why this workspace cannot serve a step on layer of c.
func (ws *Workspace) check(p Params, c *kv.Cache, layer int) error {
	switch {
	case ws == nil:
		return fmt.Errorf("attention: nil workspace")
	case ws.err != nil:
		return ws.err
	case p.Heads != ws.p.Heads || p.KVHeads != ws.p.KVHeads || p.HeadDim != ws.p.HeadDim:
		return fmt.Errorf("attention: %d heads, %d kv heads of dim %d differ from the workspace's %d, %d of dim %d",
			p.Heads, p.KVHeads, p.HeadDim, ws.p.Heads, ws.p.KVHeads, ws.p.HeadDim)
	}
	if err := p.validate(); err != nil {
		return err
	}
	if err := p.checkScale(); err != nil {
		return err
	}
	return p.checkCache(c, layer)
}
