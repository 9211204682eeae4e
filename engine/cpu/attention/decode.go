package attention

import (
	"fmt"

	"nibble/engine/fastmath"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// Decode computes one token's attention: q (Heads·HeadDim floats, RoPE
// applied) against cached positions [max(0, n-Window), n) of layer, into
// out (Heads·HeadDim). Pass 1 runs (kv head, split) items on the pool, each
// reading its token range once for the G query heads of the group; pass 2
// merges the splits per query head.
func Decode(pool *parallel.Pool, ws *Workspace, out, q []float32, c *kv.Cache, layer, n int, p Params) error {
	return DecodeScores(pool, ws, out, q, c, layer, n, p, nil, 0)
}

// DecodeScores is Decode that also exports the pre-softmax scores, as the
// Metal decode kernel's score export does: scores[h·stride + t] =
// Scale·q_h·k_t for query head h and every visible position t in
// [max(0, n-Window), n) (absolute positions; other entries are not
// written), with k_t in the original space, from the residual window's f16
// ring where it holds t, before any soft-cap. The scores are copied from the fused pass's blocks,
// so K is not read again. scores nil turns the export off.
func DecodeScores(pool *parallel.Pool, ws *Workspace, out, q []float32, c *kv.Cache, layer, n int, p Params, scores []float32, stride int) error {
	if err := ws.check(p, c, layer); err != nil {
		return err
	}
	width := p.Heads * p.HeadDim
	switch {
	case n < 1 || n > c.Config().Ctx || n > ws.ctx:
		return fmt.Errorf("attention decode: %d positions outside [1, %d]", n, min(c.Config().Ctx, ws.ctx))
	case len(q) < width || len(out) < width:
		return fmt.Errorf("attention decode: q and out need %d floats, got %d and %d", width, len(q), len(out))
	case scores != nil && stride < n:
		return fmt.Errorf("attention decode: score stride %d shorter than the %d positions", stride, n)
	case scores != nil && len(scores) < (p.Heads-1)*stride+n:
		return fmt.Errorf("attention decode: scores need %d floats for %d heads at stride %d, got %d", (p.Heads-1)*stride+n, p.Heads, stride, len(scores))
	}
	lo := p.visible(n - 1)
	lv := c.Layer(layer)
	if err := checkRing(lv, p, lo, n); err != nil {
		return fmt.Errorf("attention decode: %w", err)
	}
	s := ws.splitCount(n-lo, pool.Threads())
	ws.job = job{p: p, lv: lv, out: out, q: q, n: n, lo: lo, splits: s, chunk: (n - lo + s - 1) / s,
		tail: lv.TailStart(lo, n), permuted: lv.Type == kv.Q4 && kern.q4Permuted, scores: scores, stride: stride}
	for i := range ws.slots {
		ws.slots[i].qFor = -1
	}
	ws.run(pool, p.KVHeads*s, ws.decodeTask)
	ws.run(pool, p.Heads, ws.mergeTask)
	ws.job = job{}
	return nil
}

// decodeItem is pass 1 for (kv head, split): unnormalized o, m and l of
// each of the group's query heads over the split's tokens.
func (ws *Workspace) decodeItem(st *slot, item int) {
	j := &ws.job
	g, d := st.g, st.d
	kvh, s := item/j.splits, item%j.splits
	t0 := j.lo + s*j.chunk
	t1 := min(j.n, t0+j.chunk)
	part := kvh*j.splits + s
	st.o = ws.partO[part*g*d : (part+1)*g*d]
	st.ml = ws.partML[part*2*g : (part+1)*2*g]
	resetAccumulators(st.o, st.ml)
	st.softcap = j.p.Softcap
	if t0 < t1 {
		// A worker mostly claims consecutive splits of one kv head: the
		// prepared query is reused until the head changes.
		if st.qFor != kvh {
			st.prepareQuery(j.q[kvh*g*d:(kvh+1)*g*d], j.p.Scale, groupOf(j.lv), j.permuted, j.lv, kvh)
			st.qFor = kvh
		}
		if j.scores != nil {
			st.exp, st.expStride = j.scores[kvh*g*j.stride:], j.stride
		}
		st.attendCached(j.lv, kvh, t0, t1, j.tail)
		st.exp = nil
	}
	st.o, st.ml = st.ownO, st.ownML
}

// groupOf is the metadata group size (0 for f16: no qdot identity).
func groupOf(lv *kv.LayerView) int {
	if lv.Type == kv.F16 {
		return 0
	}
	return lv.GroupSize
}

// mergeHead is pass 2 for query head h: M = max m_s, w_s = 2^(m_s - M),
// o = Σ w_s·o_s / Σ w_s·l_s, written in element order; a sink adds
// 2^(sink − M) to the denominator (M includes it).
func (ws *Workspace) mergeHead(st *slot, h int) {
	j := &ws.job
	g, d := st.g, st.d
	kvh, jh := h/g, h%g
	acc := st.nbuf[:d]
	// The sink joins as one more split with a zero accumulator and l = 1.
	sink := j.p.sinkLog2(h)
	m := sink
	for s := 0; s < j.splits; s++ {
		m = max(m, ws.partML[((kvh*j.splits+s)*g+jh)*2])
	}
	clear(acc)
	var den float32
	if sink != negInf {
		den = fastmath.Exp2(sink - m)
	}
	for s := 0; s < j.splits; s++ {
		part := (kvh*j.splits+s)*g + jh
		w := fastmath.Exp2(ws.partML[2*part] - m)
		if w == 0 {
			continue
		}
		den += w * ws.partML[2*part+1]
		kern.axpy(acc, w, ws.partO[part*d:(part+1)*d])
	}
	writeOut(j.out[h*d:(h+1)*d], acc, 1/den, j.permuted)
}

// writeOut stores acc·inv into dst in element order.
func writeOut(dst, acc []float32, inv float32, permuted bool) {
	if permuted {
		for e := range dst {
			dst[e] = acc[laneOf(e)] * inv
		}
		return
	}
	for e := range dst {
		dst[e] = acc[e] * inv
	}
}
