package attention

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
// the metadata stride (gs 0: no groups, f16/f32 caches).
func (st *slot) prepareQuery(q []float32, scale float32, gs int, permuted bool) {
	d, ms := st.d, st.ms
	k := scale * log2e
	for j := 0; j < st.g; j++ {
		src, dst := q[j*d:(j+1)*d], st.q[j*d:(j+1)*d]
		qsI := st.qsI[j*ms : (j+1)*ms]
		clear(qsI)
		for e, x := range src {
			x *= k
			if permuted {
				dst[laneOf(e)] = x
			} else {
				dst[e] = x
			}
			if gs > 0 {
				qsI[2*(e/gs)+1] += x
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
