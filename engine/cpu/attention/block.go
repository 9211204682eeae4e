package attention

import (
	"math"
	"unsafe"

	"nibble/engine/fastmath"
	"nibble/engine/half"
	"nibble/engine/kv"
)

var negInf = float32(math.Inf(-1))

// attendCached runs the st's G query heads over cached tokens [lo, hi) of kv
// head kvh, reading positions from tail on from the residual window's f16
// ring and the others from their codes, in one online softmax.
func (st *slot) attendCached(lv *kv.LayerView, kvh, lo, hi, tail int) {
	if end := min(hi, max(lo, tail)); end > lo {
		st.attendCodes(lv, kvh, lo, end)
	}
	if start := max(lo, tail); start < hi {
		st.attendTail(lv, kvh, start, hi)
	}
}

// attendTail runs the G heads over positions [lo, hi), all held by the
// residual window's ring: per block of 32 tokens the f16 rows are widened
// into st.vbuf in the query's lane order and go through the f32 kernels.
func (st *slot) attendTail(lv *kv.LayerView, kvh, lo, hi int) {
	d := st.d
	permuted := lv.Type == kv.Q4 && kern.q4Permuted
	for t := lo; t < hi; t += blockTokens {
		nb := min(blockTokens, hi-t)
		widenTail(st.vbuf[:nb*d], lv, &lv.K, kvh, t, permuted)
		kern.f32Scores(st, st.vbuf[:nb*d], nb)
		if st.exp != nil {
			st.exportScores(t, nb)
		}
		st.softmax(nb)
		widenTail(st.vbuf[:nb*d], lv, &lv.V, kvh, t, permuted)
		kern.f32AccV(st, st.vbuf[:nb*d], nb)
	}
}

// widenTail writes the ring rows of positions from..from+len(dst)/D as
// floats, in lane order when permuted.
func widenTail(dst []float32, lv *kv.LayerView, p *kv.Plane, kvh, from int, permuted bool) {
	d := lv.HeadDim
	for i := 0; i*d < len(dst); i++ {
		row, out := lv.TailRow(p, kvh, from+i), dst[i*d:(i+1)*d]
		if permuted {
			for e, h := range row {
				out[laneOf(e)] = half.ToFloat32(h)
			}
			continue
		}
		unpackF16(out, row)
	}
}

// attendCodes runs the G heads over cached tokens [lo, hi) read from their
// codes: per block of 32 tokens, scores from the codes, one online-softmax
// update, then V accumulated from the codes. K and V of each token are read
// once for all G heads.
func (st *slot) attendCodes(lv *kv.LayerView, kvh, lo, hi int) {
	gs := lv.GroupSize
	for t := lo; t < hi; t += blockTokens {
		nb := min(blockTokens, hi-t)
		k := st.codeBlock(lv, &lv.K, kvh, t, nb)
		switch lv.Type {
		case kv.Q4:
			kern.meta(st.metaK, k.meta, nb, len(k.meta)/nb, st.ms)
			kern.q4Scores(st, k.q4, nb, gs)
		case kv.Q8:
			kern.meta(st.metaK, k.meta, nb, len(k.meta)/nb, st.ms)
			kern.q8Scores(st, k.q8, nb, gs)
		default:
			kern.f16Scores(st, k.f16, nb)
		}
		if st.exp != nil {
			st.exportScores(t, nb)
		}
		st.softmax(nb)
		v := st.codeBlock(lv, &lv.V, kvh, t, nb)
		switch lv.Type {
		case kv.Q4:
			kern.meta(st.metaV, v.meta, nb, len(v.meta)/nb, st.ms)
			kern.q4AccV(st, v.q4, nb, gs)
		case kv.Q8:
			kern.meta(st.metaV, v.meta, nb, len(v.meta)/nb, st.ms)
			kern.q8AccV(st, v.q8, nb, gs)
		default:
			kern.f16AccV(st, v.f16, nb)
		}
	}
}

// codes is one block's codes and metadata (halves) of one plane: the field
// of the cache's type is set.
type codes struct {
	q4   []uint32
	q8   []uint8
	f16  []uint16
	meta []uint16
}

// codeBlock is the codes of positions [t, t+nb) of kv head kvh in plane p.
// Where a sliding-window ring wraps inside the block, its two runs of slots
// are copied one after the other into st.gather, so the block is read, and
// rounded, exactly as the unbounded cache's.
func (st *slot) codeBlock(lv *kv.LayerView, p *kv.Plane, kvh, t, nb int) codes {
	s0 := kvh*lv.Ctx + lv.Slot(t)
	n1 := lv.SlotRun(t, t+nb) - t
	if n1 == nb {
		return planeCodes(lv, p, s0, nb)
	}
	a, b := planeCodes(lv, p, s0, n1), planeCodes(lv, p, kvh*lv.Ctx+lv.Slot(t+n1), nb-n1)
	d := lv.HeadDim
	halves := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(st.gather))), 2*len(st.gather))
	var g codes
	codeHalves := 0
	switch lv.Type {
	case kv.Q4:
		g.q4 = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(st.gather))), nb*d/8)
		copy(g.q4[copy(g.q4, a.q4):], b.q4)
		codeHalves = nb * d / 4
	case kv.Q8:
		g.q8 = unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(st.gather))), nb*d)
		copy(g.q8[copy(g.q8, a.q8):], b.q8)
		codeHalves = nb * d / 2
	default:
		g.f16 = halves[:nb*d]
		copy(g.f16[copy(g.f16, a.f16):], b.f16)
		return g
	}
	g.meta = halves[codeHalves : codeHalves+len(a.meta)+len(b.meta)]
	copy(g.meta[copy(g.meta, a.meta):], b.meta)
	return g
}

// planeCodes is the codes of nb consecutive slots of plane p from slot s
// (kv head·Ctx + the position's slot).
func planeCodes(lv *kv.LayerView, p *kv.Plane, s, nb int) codes {
	d := lv.HeadDim
	switch lv.Type {
	case kv.Q4:
		mp := 2 * d / lv.GroupSize // metadata halves per token
		return codes{q4: p.Q4[s*d/8 : (s+nb)*d/8], meta: p.Meta[s*mp : (s+nb)*mp]}
	case kv.Q8:
		mp := 2 * d / lv.GroupSize
		return codes{q8: p.Q8[s*d : (s+nb)*d], meta: p.Meta[s*mp : (s+nb)*mp]}
	}
	return codes{f16: p.F16[s*d : (s+nb)*d]}
}

// exportScores copies the block's scores of positions [t, t+nb), still in
// the log2 domain (the prepared query carries log2(e)), to st.exp as
// Scale·q·k.
func (st *slot) exportScores(t, nb int) {
	for j := 0; j < st.g; j++ {
		dst := st.exp[j*st.expStride+t : j*st.expStride+t+nb]
		for i, x := range st.sc[j*blockTokens : j*blockTokens+nb] {
			dst[i] = x * (1 / log2e)
		}
	}
}

// attendNew runs the G heads over rows [lo, hi) of f32 keys and values
// (D floats per row, lane order): prefill's new tokens.
func (st *slot) attendNew(k, v []float32, lo, hi int) {
	d := st.d
	for t := lo; t < hi; t += blockTokens {
		nb := min(blockTokens, hi-t)
		kern.f32Scores(st, k[t*d:(t+nb)*d], nb)
		st.softmax(nb)
		kern.f32AccV(st, v[t*d:(t+nb)*d], nb)
	}
}

// softmax turns the block's scores (log2 domain) into probabilities
// against the new running max and rescales each head's accumulator once,
// soft-capping the scores first when the layer asks for it.
func (st *slot) softmax(nb int) {
	if st.softcap > 0 {
		st.capScores(nb)
	}
	kern.softmax(st.sc, st.ml, st.o, st.g, st.d, nb)
}

// capScores applies c·tanh(s/c) to the block's scores. They hold
// s·log2(e), so the cap in that domain is c' = c·log2(e):
// log2(e)·c·tanh(s/c) = c'·tanh(x/c').
func (st *slot) capScores(nb int) {
	c := float64(st.softcap) * log2e
	for j := 0; j < st.g; j++ {
		for t, x := range st.sc[j*blockTokens : j*blockTokens+nb] {
			st.sc[j*blockTokens+t] = float32(c * math.Tanh(float64(x)/c))
		}
	}
}

func softmaxGo(sc, ml, o []float32, g, d, nb int) {
	for j := 0; j < g; j++ {
		s := sc[j*blockTokens : j*blockTokens+nb]
		m := ml[2*j]
		mNew := m
		for _, x := range s {
			mNew = max(mNew, x)
		}
		var sum float32
		for t, x := range s {
			p := fastmath.Exp2(x - mNew)
			s[t] = p
			sum += p
		}
		alpha := fastmath.Exp2(m - mNew)
		ml[2*j], ml[2*j+1] = mNew, ml[2*j+1]*alpha+sum
		if alpha != 1 {
			oj := o[j*d : (j+1)*d]
			for i := range oj {
				oj[i] *= alpha
			}
		}
	}
}
