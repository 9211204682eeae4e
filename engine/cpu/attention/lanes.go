package attention

import "nibble/engine/kv"

// Kernel lane order. The SIMD q4 kernels widen 8 code bytes (16 elements)
// to 8 lanes and split low from high nibbles, so they see the even elements
// of the run, then the odd ones. Rather than re-interleave per token, the
// query is stored in that order once per step and the accumulator is put
// back in element order once at the end; dot products do not care.

// laneOf is the lane of element e when permuted.
func laneOf(e int) int {
	r := e & 15
	return e&^15 | r>>1 | (r&1)<<3
}

// prepareQuery fills st.q with q·scale·log2(e) for the G heads of q (G·D
// floats, element order) and st.qsI with each group's Σq' at lane 2g+1 of
// the metadata stride (gs 0: no groups, f16/f32 caches). Queries meet the
// cache's K transform (smoothing, rotation) of kv head kvh first.
func (st *slot) prepareQuery(q []float32, scale float32, gs int, permuted bool, lv *kv.LayerView, kvh int) {
	d, ms := st.d, st.ms
	k := scale * log2e
	for j := 0; j < st.g; j++ {
		src, dst := q[j*d:(j+1)*d], st.q[j*d:(j+1)*d]
		src = lv.TransformQuery(st.nbuf[:d], src, kvh) // nbuf is free here
		e := 0
		if permuted {
			// laneOf unrolled per 16-element run: this runs once per work
			// item, and a per-element index computation made it cost as
			// much as a block of attention.
			for ; e+16 <= d; e += 16 {
				s, o := src[e:e+16:e+16], dst[e:e+16:e+16]
				o[0], o[1], o[2], o[3] = s[0]*k, s[2]*k, s[4]*k, s[6]*k
				o[4], o[5], o[6], o[7] = s[8]*k, s[10]*k, s[12]*k, s[14]*k
				o[8], o[9], o[10], o[11] = s[1]*k, s[3]*k, s[5]*k, s[7]*k
				o[12], o[13], o[14], o[15] = s[9]*k, s[11]*k, s[13]*k, s[15]*k
			}
			for ; e < d; e++ {
				dst[laneOf(e)] = src[e] * k
			}
		} else {
			for e, x := range src {
				dst[e] = x * k
			}
		}
		qsI := st.qsI[j*ms : (j+1)*ms]
		clear(qsI)
		if gs > 0 {
			for g := 0; g < d/gs; g++ {
				var sum float32
				for _, x := range src[g*gs : (g+1)*gs] {
					sum += x * k
				}
				qsI[2*g+1] = sum
			}
		}
	}
}

// resetAccumulators starts an online softmax: o = 0, m = -Inf, l = 0.
func resetAccumulators(o, ml []float32) {
	clear(o)
	for j := 0; j < len(ml); j += 2 {
		ml[j], ml[j+1] = negInf, 0
	}
}
