package attention

import "nibble/engine/half"

// metaGo converts nb tokens of {scale, bias} halves (pairs2 halves per
// token) into floats at stride ms, zero padded.
func metaGo(dst []float32, src []uint16, nb, pairs2, ms int) {
	for t := 0; t < nb; t++ {
		row := dst[t*ms : (t+1)*ms]
		for i, h := range src[t*pairs2 : (t+1)*pairs2] {
			row[i] = half.ToFloat32(h)
		}
		clear(row[pairs2:])
	}
}

// nibbles maps a code byte to its two elements (low nibble first): a
// 256-entry table measured 1.65× faster than shifts and masks here.
var nibbles = func() (t [256][2]float32) {
	for b := range t {
		t[b] = [2]float32{float32(b & 15), float32(b >> 4)}
	}
	return
}()

func unpackQ4(dst []float32, words []uint32, permuted bool) {
	if permuted {
		for w, x := range words {
			for i := 0; i < 8; i++ {
				dst[laneOf(8*w+i)] = float32(x >> (4 * i) & 15)
			}
		}
		return
	}
	for w, x := range words {
		n := dst[8*w : 8*w+8]
		a, b, c, d := nibbles[x&255], nibbles[x>>8&255], nibbles[x>>16&255], nibbles[x>>24]
		n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7] = a[0], a[1], b[0], b[1], c[0], c[1], d[0], d[1]
	}
}

func unpackQ8(dst []float32, codes []uint8) {
	for i, c := range codes {
		dst[i] = float32(c)
	}
}

func unpackF16(dst []float32, h []uint16) {
	for i, x := range h {
		dst[i] = half.ToFloat32(x)
	}
}

// codeScores is the qdot identity for one token whose codes are unpacked
// in n: score_j = Σ_g s_g·(q'_j,g · n_g) + b_g·Σq'_j,g.
func codeScores(st *slot, n, meta []float32, t, gs int) {
	d, ms := st.d, st.ms
	ng := d / gs
	for j := 0; j < st.g; j++ {
		qj, qs := st.q[j*d:(j+1)*d], st.qsI[j*ms:(j+1)*ms]
		var score float32
		for g := 0; g < ng; g++ {
			score += meta[2*g]*dotGo(qj[g*gs:(g+1)*gs], n[g*gs:(g+1)*gs]) + meta[2*g+1]*qs[2*g+1]
		}
		st.sc[j*blockTokens+t] = score
	}
}

// codeAccV adds p·(s·n + b) per group for one token: o += (p·s)·n + p·b.
func codeAccV(st *slot, n, meta []float32, t, gs int) {
	d := st.d
	for j := 0; j < st.g; j++ {
		p := st.sc[j*blockTokens+t]
		oj := st.o[j*d : (j+1)*d]
		for g := 0; g < d/gs; g++ {
			w, c := p*meta[2*g], p*meta[2*g+1]
			og, ng := oj[g*gs:(g+1)*gs], n[g*gs:(g+1)*gs]
			for i := range og {
				og[i] += w*ng[i] + c
			}
		}
	}
}

func q4ScoresGo(st *slot, codes []uint32, nb, gs int) { q4Scores(st, codes, nb, gs, false) }
func q4AccVGo(st *slot, codes []uint32, nb, gs int)   { q4AccV(st, codes, nb, gs, false) }

// q4Scores and q4AccV unpack in element or SIMD lane order (the SIMD set
// falls back to them for shapes its kernels do not take).
func q4Scores(st *slot, codes []uint32, nb, gs int, permuted bool) {
	w := st.d / 8
	for t := 0; t < nb; t++ {
		unpackQ4(st.nbuf, codes[t*w:(t+1)*w], permuted)
		codeScores(st, st.nbuf, st.metaK[t*st.ms:], t, gs)
	}
}

func q4AccV(st *slot, codes []uint32, nb, gs int, permuted bool) {
	w := st.d / 8
	for t := 0; t < nb; t++ {
		unpackQ4(st.nbuf, codes[t*w:(t+1)*w], permuted)
		codeAccV(st, st.nbuf, st.metaV[t*st.ms:], t, gs)
	}
}

func q8ScoresGo(st *slot, codes []uint8, nb, gs int) {
	d := st.d
	for t := 0; t < nb; t++ {
		unpackQ8(st.nbuf, codes[t*d:(t+1)*d])
		codeScores(st, st.nbuf, st.metaK[t*st.ms:], t, gs)
	}
}

func q8AccVGo(st *slot, codes []uint8, nb, gs int) {
	d := st.d
	for t := 0; t < nb; t++ {
		unpackQ8(st.nbuf, codes[t*d:(t+1)*d])
		codeAccV(st, st.nbuf, st.metaV[t*st.ms:], t, gs)
	}
}

func f16ScoresGo(st *slot, k []uint16, nb int) {
	d := st.d
	for t := 0; t < nb; t++ {
		unpackF16(st.nbuf, k[t*d:(t+1)*d])
		for j := 0; j < st.g; j++ {
			st.sc[j*blockTokens+t] = dotGo(st.q[j*d:(j+1)*d], st.nbuf)
		}
	}
}

func f16AccVGo(st *slot, v []uint16, nb int) {
	d := st.d
	for t := 0; t < nb; t++ {
		unpackF16(st.nbuf, v[t*d:(t+1)*d])
		for j := 0; j < st.g; j++ {
			axpyGo(st.o[j*d:(j+1)*d], st.sc[j*blockTokens+t], st.nbuf)
		}
	}
}

func f32ScoresGo(st *slot, k []float32, nb int) {
	d := st.d
	for t := 0; t < nb; t++ {
		for j := 0; j < st.g; j++ {
			st.sc[j*blockTokens+t] = dotGo(st.q[j*d:(j+1)*d], k[t*d:(t+1)*d])
		}
	}
}

func f32AccVGo(st *slot, v []float32, nb int) {
	d := st.d
	for t := 0; t < nb; t++ {
		for j := 0; j < st.g; j++ {
			axpyGo(st.o[j*d:(j+1)*d], st.sc[j*blockTokens+t], v[t*d:(t+1)*d])
		}
	}
}

// dotGo is Σ a[i]·b[i] with four partial sums (len(a) a multiple of 4 not
// required).
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpyGo is y += a·x.
func axpyGo(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
