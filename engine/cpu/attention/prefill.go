package attention

import (
	"fmt"

	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// Prefill computes causal attention for rows query rows at positions
// past..past+rows-1 (q: rows×Heads·HeadDim, RoPE applied) into out. Row i
// sees the cached prefix [max(0, past+i+1-Window), past) of layer, read
// from the cache with the decode kernels, and new rows 0..i of k and v
// (rows×KVHeads·HeadDim) rounded through f16 as an f16 cache would hold
// them. The caller stores k and v with Cache.Append afterwards, and sets
// the layer's smoothing (Cache.SetLambda) before, when rows start the cache.
func Prefill(pool *parallel.Pool, ws *Workspace, out, q, k, v []float32, rows int, c *kv.Cache, layer, past int, p Params) error {
	return ws.prefill(pool, out, q, k, v, rows, c, layer, past, p, nil)
}

// prefill is Prefill that, with rowML set, also leaves each row's final
// softmax {m, l} per query head there ([row][head], log2 domain).
func (ws *Workspace) prefill(pool *parallel.Pool, out, q, k, v []float32, rows int, c *kv.Cache, layer, past int, p Params, rowML []float32) error {
	if err := ws.check(p, c, layer); err != nil {
		return err
	}
	qw, kw := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	switch {
	case rows < 0 || rows > ws.maxBatch:
		return fmt.Errorf("attention prefill: %d rows outside [0, %d] (workspace batch)", rows, ws.maxBatch)
	case past < 0 || past+rows > c.Config().Ctx || past > ws.ctx:
		return fmt.Errorf("attention prefill: positions [%d, %d) outside the context of %d", past, past+rows, min(c.Config().Ctx, ws.ctx))
	case len(q) < rows*qw || len(out) < rows*qw:
		return fmt.Errorf("attention prefill: q and out need %d floats, got %d and %d", rows*qw, len(q), len(out))
	case len(k) < rows*kw || len(v) < rows*kw:
		return fmt.Errorf("attention prefill: k and v need %d floats, got %d and %d", rows*kw, len(k), len(v))
	}
	if rows == 0 {
		return nil
	}
	lv := c.Layer(layer)
	if err := checkRing(lv, p, p.visible(past), past); err != nil {
		return fmt.Errorf("attention prefill: %w", err)
	}
	ws.job = job{p: p, lv: lv, out: out, q: q, k: k, v: v, rows: rows, past: past,
		tail: lv.TailStart(0, past), permuted: lv.Type == kv.Q4 && kern.q4Permuted}
	ws.job.column.rowML = rowML
	ws.run(pool, rows, ws.stageTask)
	// Longest rows first: they have the most keys.
	ws.run(pool, rows*p.KVHeads, ws.prefillTask)
	ws.job = job{}
	return nil
}

// stageRow copies new row i of K and V, rounded through f16, into the
// staging area in [kv head][row] order and kernel lane order.
// K rows get the cache's transform (smoothing, rotation) first, as
// Cache.Append will give them.
func (ws *Workspace) stageRow(st *slot, i int) {
	j := &ws.job
	d := ws.p.HeadDim
	for h := 0; h < ws.p.KVHeads; h++ {
		src := (i*ws.p.KVHeads + h) * d
		dst := (h*j.rows + i) * d
		kRow := j.lv.TransformKey(st.nbuf[:d], j.k[src:src+d], h)
		for e := 0; e < d; e++ {
			lane := e
			if j.permuted {
				lane = laneOf(e)
			}
			ws.newK[dst+lane] = half.Round(kRow[e])
			ws.newV[dst+lane] = half.Round(j.v[src+e])
		}
	}
}

// prefillItem attends the G query heads of kv head kvh for one row.
func (ws *Workspace) prefillItem(st *slot, item int) {
	j := &ws.job
	g, d := st.g, st.d
	row := j.rows - 1 - item/ws.p.KVHeads
	kvh := item % ws.p.KVHeads
	pos := j.past + row
	lo := j.p.visible(pos)
	qoff := (row*ws.p.Heads + kvh*g) * d
	resetAccumulators(st.o, st.ml)
	st.softcap = j.p.Softcap
	st.prepareQuery(j.q[qoff:qoff+g*d], j.p.Scale, groupOf(j.lv), j.permuted, j.lv, kvh)
	st.qFor = -1
	if lo < j.past {
		st.attendCached(j.lv, kvh, lo, j.past, j.tail)
	}
	staged := kvh * j.rows * d
	st.attendNew(ws.newK[staged:staged+j.rows*d], ws.newV[staged:staged+j.rows*d], max(0, lo-j.past), row+1)
	for h := 0; h < g; h++ {
		addSink(st.o[h*d:(h+1)*d], st.ml[2*h:2*h+2], j.p.sinkLog2(kvh*g+h))
		writeOut(j.out[qoff+h*d:qoff+(h+1)*d], st.o[h*d:(h+1)*d], 1/st.ml[2*h+1], j.permuted)
	}
	if ml := j.column.rowML; ml != nil {
		at := 2 * (row*ws.p.Heads + kvh*g)
		copy(ml[at:at+2*g], st.ml[:2*g])
	}
}
