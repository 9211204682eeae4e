package attention

import (
	"fmt"
	"unsafe"

	"nibble/engine/fastmath"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// Score accumulation for H2O eviction (docs/ARCHITECTURE.md, "Eviction
// (H2O)"): every query's softmax-normalized attention is added, per kv head
// (summed over the group's query heads), to the cache's score of each slot
// it read. Decode takes the probabilities from the fused kernel's score
// export; prefill runs a second pass over the batch's keys once each row's
// softmax normalizer is known, so that a long prompt processed in batches
// is scored too.

// ScoreScratch is what score accumulation needs besides the workspace.
type ScoreScratch struct {
	heads, kvHeads, slots, maxBatch int

	raw   []float32 // decode: [query head][slot] scores, then exp(s - max)
	inv   []float32 // decode: per query head, 1/Σ exp(s - max)
	rowML []float32 // prefill: [row][query head]{m, l}, log2 domain
	// prefill: each row's prepared queries ([row][query head], D floats
	// and metaStride(D) group sums), made once for all key blocks.
	prepQ, prepS []float32

	// The decode step in progress, read by the persistent closures.
	acc        []float32
	sinks      []float32
	lo, n      int
	normalize  func(lo, hi int)
	accumulate func(lo, hi int)
}

// ScoreScratchBytes is what NewScoreScratch allocates for a cache of slots
// positions and prefill batches of maxBatch rows.
func ScoreScratchBytes(p Params, slots, maxBatch int) int64 {
	perRow := int64(p.Heads) * int64(2+p.HeadDim+metaStride(p.HeadDim))
	return 4 * (int64(p.Heads)*int64(slots) + int64(p.Heads) + int64(maxBatch)*perRow)
}

// NewScoreScratch allocates through alloc (nil: make) the scratch for
// p's geometry.
func NewScoreScratch(p Params, slots, maxBatch int, alloc func(nbytes int) []byte) (*ScoreScratch, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	nbytes := ScoreScratchBytes(p, slots, maxBatch)
	raw := alloc(int(nbytes))
	if int64(len(raw)) != nbytes || uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4 != 0 {
		return nil, fmt.Errorf("attention: score scratch: allocator returned %d bytes (want %d, 4-byte aligned)", len(raw), nbytes)
	}
	all := unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), nbytes/4)
	sc := &ScoreScratch{heads: p.Heads, kvHeads: p.KVHeads, slots: slots, maxBatch: maxBatch}
	sc.raw, all = all[:p.Heads*slots:p.Heads*slots], all[p.Heads*slots:]
	sc.inv, all = all[:p.Heads:p.Heads], all[p.Heads:]
	n := 2 * maxBatch * p.Heads
	sc.rowML, all = all[:n:n], all[n:]
	n = maxBatch * p.Heads * p.HeadDim
	sc.prepQ, sc.prepS = all[:n:n], all[n:]
	sc.normalize, sc.accumulate = sc.normalizeHeads, sc.accumulateSlots
	return sc, nil
}

// DecodeAccumulate is Decode that, when the cache scores positions
// (kv.Cache.Scores), adds each query head's attention probabilities over
// the visible positions to its kv head's scores, from the fused kernel's
// score export. Without scores (or sc nil) it is Decode.
func DecodeAccumulate(pool *parallel.Pool, ws *Workspace, sc *ScoreScratch, out, q []float32, c *kv.Cache, layer, n int, p Params) error {
	if sc == nil || c == nil || layer < 0 || layer >= c.Config().Layers || c.Scores(layer) == nil {
		return Decode(pool, ws, out, q, c, layer, n, p)
	}
	if p.Heads != sc.heads || p.KVHeads != sc.kvHeads || n > sc.slots {
		return fmt.Errorf("attention decode: score scratch for %d heads and %d positions cannot take %d heads and %d positions", sc.heads, sc.slots, p.Heads, n)
	}
	if err := DecodeScores(pool, ws, out, q, c, layer, n, p, sc.raw, sc.slots); err != nil {
		return err
	}
	sc.acc, sc.lo, sc.n, sc.sinks = c.Scores(layer), p.visible(n-1), n, p.Sinks
	pool.For(sc.heads, 1, sc.normalize)
	pool.For(n-sc.lo, 256, sc.accumulate)
	sc.acc, sc.sinks = nil, nil
	return nil
}

// normalizeHeads turns the exported scores of query heads [lo, hi) into
// exp(s - max) and keeps 1/Σ.
func (sc *ScoreScratch) normalizeHeads(lo, hi int) {
	for h := lo; h < hi; h++ {
		row := sc.raw[h*sc.slots+sc.lo : h*sc.slots+sc.n]
		m := row[0]
		for _, x := range row[1:] {
			m = max(m, x)
		}
		// A sink takes its share of the softmax, as in the attention.
		var sum float32
		if sc.sinks != nil {
			m = max(m, sc.sinks[h])
			sum = fastmath.Exp2((sc.sinks[h] - m) * log2e)
		}
		for i, x := range row {
			e := fastmath.Exp2((x - m) * log2e)
			row[i] = e
			sum += e
		}
		sc.inv[h] = 1 / sum
	}
}

// accumulateSlots adds the probabilities of visible positions lo+[lo, hi)
// to the scores, summed over each kv head's query heads.
func (sc *ScoreScratch) accumulateSlots(lo, hi int) {
	g := sc.heads / sc.kvHeads
	for kvh := 0; kvh < sc.kvHeads; kvh++ {
		acc := sc.acc[kvh*sc.slots:]
		for h := kvh * g; h < (kvh+1)*g; h++ {
			row, inv := sc.raw[h*sc.slots:], sc.inv[h]
			for t := sc.lo + lo; t < sc.lo+hi; t++ {
				acc[t] += row[t] * inv
			}
		}
	}
}

// columnJob is the prefill score pass's part of a job.
type columnJob struct {
	rowML   []float32 // [row][query head]{m, l}: set, Prefill keeps them
	acc     []float32 // the layer's scores, [kv head][slot] at stride slots
	pending []float32 // the new rows' sums, [kv head][row] at stride slots (nil: dropped)
	slots   int
	// Key blocks: [0, codeBlocks) over cached slots [0, tail) read from
	// codes, then ring blocks over [tail, past), then new-row blocks.
	codeBlocks, ringBlocks, newBlocks int
	prepQ, prepS                      []float32 // ScoreScratch's
}

// PrefillAccumulate is Prefill that, when the cache scores positions, also
// adds the attention every row gave each cached slot to its score and
// leaves the attention the new rows received in the cache's pending scores
// (kv.Cache.PendingScores), which the Append of these rows takes. Without
// scores (or sc nil) it is Prefill.
func PrefillAccumulate(pool *parallel.Pool, ws *Workspace, sc *ScoreScratch, out, q, k, v []float32, rows int, c *kv.Cache, layer, past int, p Params) error {
	if sc == nil || c == nil || layer < 0 || layer >= c.Config().Layers || c.Scores(layer) == nil {
		return Prefill(pool, ws, out, q, k, v, rows, c, layer, past, p)
	}
	if p.Heads != sc.heads || p.KVHeads != sc.kvHeads || rows > sc.maxBatch || past > sc.slots {
		return fmt.Errorf("attention prefill: score scratch for %d heads, %d rows and %d positions cannot take %d heads, %d rows after %d positions",
			sc.heads, sc.maxBatch, sc.slots, p.Heads, rows, past)
	}
	rowML := sc.rowML[:2*rows*p.Heads]
	if err := ws.prefill(pool, out, q, k, v, rows, c, layer, past, p, rowML); err != nil || rows == 0 {
		return err
	}
	lv := c.Layer(layer)
	tail := lv.TailStart(0, past)
	blocks := func(n int) int { return (n + blockTokens - 1) / blockTokens }
	ws.job = job{p: p, lv: lv, q: q, rows: rows, past: past, tail: tail, permuted: lv.Type == kv.Q4 && kern.q4Permuted,
		column: columnJob{rowML: rowML, acc: c.Scores(layer), pending: c.PendingScores(layer, rows), slots: sc.slots,
			codeBlocks: blocks(tail), ringBlocks: blocks(past - tail), newBlocks: blocks(rows), prepQ: sc.prepQ, prepS: sc.prepS}}
	cj := &ws.job.column
	ws.run(pool, rows*p.KVHeads, ws.prepareTask)
	ws.run(pool, p.KVHeads*(cj.codeBlocks+cj.ringBlocks+cj.newBlocks), ws.columnTask)
	ws.job = job{}
	return nil
}

// prepareRow prepares the queries of one (row, kv head) for the column
// pass, once for all its key blocks.
func (ws *Workspace) prepareRow(st *slot, item int) {
	j, cj := &ws.job, &ws.job.column
	g, d, ms := st.g, st.d, st.ms
	row, kvh := item/ws.p.KVHeads, item%ws.p.KVHeads
	at := row*ws.p.Heads + kvh*g
	st.prepareQuery(j.q[at*d:(at+g)*d], j.p.Scale, groupOf(j.lv), j.permuted, j.lv, kvh)
	st.qFor = -1
	copy(cj.prepQ[at*d:(at+g)*d], st.q[:g*d])
	copy(cj.prepS[at*ms:(at+g)*ms], st.qsI[:g*ms])
}

// columnItem sums, for kv head kvh and one block of keys, the attention
// probabilities every row of the batch gives each key (over the group's
// query heads): scores again from the same codes, ring rows or staged new
// rows the prefill read, normalized by the row's final {m, l}.
func (ws *Workspace) columnItem(st *slot, item int) {
	j, cj := &ws.job, &ws.job.column
	perHead := cj.codeBlocks + cj.ringBlocks + cj.newBlocks
	kvh, b := item/perHead, item%perHead
	g, d, lv := st.g, st.d, j.lv
	var t0, nb, firstRow int
	kind := 0 // 0 codes, 1 ring, 2 new rows
	switch {
	case b < cj.codeBlocks:
		t0 = b * blockTokens
		nb = min(blockTokens, j.tail-t0)
	case b < cj.codeBlocks+cj.ringBlocks:
		kind = 1
		t0 = j.tail + (b-cj.codeBlocks)*blockTokens
		nb = min(blockTokens, j.past-t0)
	default:
		kind = 2
		t0 = (b - cj.codeBlocks - cj.ringBlocks) * blockTokens
		nb = min(blockTokens, j.rows-t0)
		firstRow = t0 // row r sees new keys 0..r
	}
	var sums [blockTokens]float32
	if kind == 1 {
		widenTail(st.vbuf[:nb*d], lv, &lv.K, kvh, t0, j.permuted)
	}
	ownQ, ownS := st.q, st.qsI
	defer func() { st.q, st.qsI = ownQ, ownS }()
	for r := firstRow; r < j.rows; r++ {
		at := r*ws.p.Heads + kvh*g
		st.q, st.qsI = cj.prepQ[at*d:(at+g)*d], cj.prepS[at*st.ms:(at+g)*st.ms]
		switch kind {
		case 0:
			st.codeScores(lv, kvh, t0, nb)
		case 1:
			kern.f32Scores(st, st.vbuf[:nb*d], nb)
		default:
			staged := (kvh*j.rows + t0) * d
			kern.f32Scores(st, ws.newK[staged:staged+nb*d], nb)
		}
		seen := nb
		if kind == 2 {
			seen = min(nb, r-t0+1)
		}
		for h := 0; h < g; h++ {
			at := 2 * (r*ws.p.Heads + kvh*g + h)
			m, inv := cj.rowML[at], 1/cj.rowML[at+1]
			for i, s := range st.sc[h*blockTokens : h*blockTokens+seen] {
				sums[i] += fastmath.Exp2(s-m) * inv
			}
		}
	}
	if kind == 2 {
		if cj.pending != nil {
			copy(cj.pending[kvh*cj.slots+t0:kvh*cj.slots+t0+nb], sums[:nb])
		}
		return
	}
	acc := cj.acc[kvh*cj.slots+t0 : kvh*cj.slots+t0+nb]
	for i, s := range sums[:nb] {
		acc[i] += s
	}
}

// codeScores computes the block's scores (st.sc, log2 domain) of cached
// slots [t0, t0+nb) of kv head kvh from their codes, as attendCodes does.
func (st *slot) codeScores(lv *kv.LayerView, kvh, t0, nb int) {
	d, gs := lv.HeadDim, lv.GroupSize
	s0, s1 := kvh*lv.Ctx+t0, kvh*lv.Ctx+t0+nb
	switch lv.Type {
	case kv.Q4:
		mp := 2 * d / gs
		kern.meta(st.metaK, lv.K.Meta[s0*mp:s1*mp], nb, mp, st.ms)
		kern.q4Scores(st, lv.K.Q4[s0*d/8:s1*d/8], nb, gs)
	case kv.Q8:
		mp := 2 * d / gs
		kern.meta(st.metaK, lv.K.Meta[s0*mp:s1*mp], nb, mp, st.ms)
		kern.q8Scores(st, lv.K.Q8[s0*d:s1*d], nb, gs)
	default:
		kern.f16Scores(st, lv.K.F16[s0*d:s1*d], nb)
	}
}
