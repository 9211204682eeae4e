package attention

// AVX2 kernels. Pointers must cover what the portable twin would index;
// every count passed is at least 1. Head-batched kernels take up to 4
// heads (hn) per call; the wrappers walk the group in batches.

//go:noescape
func cpuid(leaf, sub uint32) (a, b, c, d uint32)

//go:noescape
func xgetbv0() (a, d uint32)

//go:noescape
func metaF32AVX(dst *float32, src *uint16, nb, pairs2, ms int)

//go:noescape
func q4ScoresAVX2(sc, q, qsI *float32, codes *uint32, meta *float32, hn, d, gs, ms, lanes, nb int)

//go:noescape
func q8ScoresAVX2(sc, q, qsI *float32, codes *uint8, meta *float32, hn, d, gs, ms, lanes, nb int)

//go:noescape
func q4Scores4AVX2(sc, q, qsI *float32, codes *uint32, meta *float32, hn, d, gs, ms, lanes, nb int, red *float32)

//go:noescape
func q8Scores4AVX2(sc, q, qsI *float32, codes *uint8, meta *float32, hn, d, gs, ms, lanes, nb int, red *float32)

//go:noescape
func f16Scores4AVX2(sc, q *float32, k *uint16, hn, d, nb int)

//go:noescape
func f32Scores4AVX2(sc, q *float32, k *float32, hn, d, nb int)

//go:noescape
func q4UnpackAVX2(dst *float32, codes *uint32, chunks int)

//go:noescape
func q8UnpackAVX2(dst *float32, codes *uint8, chunks int)

//go:noescape
func f16ToF32AVX(dst *float32, src *uint16, pieces int)

//go:noescape
func f16ScoresAVX2(sc, q *float32, k *uint16, hn, d, nb int)

//go:noescape
func f32ScoresAVX2(sc, q *float32, k *float32, hn, d, nb int)

//go:noescape
func codeWAVX2(w, p, meta *float32, hn, ms, lanes, nb int)

//go:noescape
func codeAccVAVX2(o, nf, wbuf *float32, heads, d, gsLog, ms, nb int)

//go:noescape
func q4AccV4AVX2(o *float32, codes *uint32, wbuf *float32, quads, d, gsLog, ms, nb int)

//go:noescape
func floatAccVAVX2(o, p, vf *float32, heads, d, nb, vstride int)

//go:noescape
func softmaxAVX2(sc, ml, o *float32, heads, d int)

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n int)

func init() {
	if hasAVX2FMAF16C() {
		kern = simd
	}
}

// hasAVX2FMAF16C checks the CPU and that the OS saves YMM state.
func hasAVX2FMAF16C() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const fma, osxsave, avx, f16c = 1 << 12, 1 << 27, 1 << 28, 1 << 29
	if c1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&6 != 6 {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0
}

var simd = kernels{
	meta:       metaSIMD,
	q4Scores:   q4ScoresSIMD,
	q4AccV:     q4AccVSIMD,
	q8Scores:   q8ScoresSIMD,
	q8AccV:     q8AccVSIMD,
	f16Scores:  f16ScoresSIMD,
	f16AccV:    f16AccVSIMD,
	f32Scores:  f32ScoresSIMD,
	f32AccV:    f32AccVSIMD,
	softmax:    softmaxSIMD,
	dot:        dotSIMD,
	axpy:       axpySIMD,
	q4Permuted: true,
}

// metaLanes is how many metadata floats per token the SIMD kernels read:
// 2 per group, in whole 8-lane vectors.
func metaLanes(d, gs int) int { return (max(8, 2*d/gs) + 7) &^ 7 }

// maxSIMDLanes: the V kernel keeps at most two vectors of bias sums; more
// groups per head (beyond D 256 at gs 32) take the portable kernels.
const maxSIMDLanes = 16

func metaSIMD(dst []float32, src []uint16, nb, pairs2, ms int) {
	if pairs2 != 2 && pairs2 != 4 && pairs2%8 != 0 {
		metaGo(dst, src, nb, pairs2, ms)
		return
	}
	_ = dst[(nb-1)*ms+max(8, pairs2)-1]
	_ = src[nb*pairs2-1]
	if pairs2 == ms && pairs2%8 == 0 {
		// Rows without padding (D 128 at gs 32, ...): one contiguous run,
		// converted 4 vectors per iteration.
		f16ToF32AVX(&dst[0], &src[0], nb*pairs2/8)
		return
	}
	metaF32AVX(&dst[0], &src[0], nb, pairs2, ms)
}

func gsLog(gs int) int {
	if gs == 64 {
		return 6
	}
	return 5
}

func q4ScoresSIMD(st *slot, codes []uint32, nb, gs int) {
	d := st.d
	if metaLanes(d, gs) > maxSIMDLanes {
		q4Scores(st, codes, nb, gs, true)
		return
	}
	_ = codes[nb*d/8-1]
	red := st.vbuf[:4*blockTokens*8] // free until the V step
	for hb := 0; hb < st.g; hb += 4 {
		if st.g-hb >= 4 {
			q4Scores4AVX2(&st.sc[hb*blockTokens], &st.q[hb*d], &st.qsI[hb*st.ms], &codes[0], &st.metaK[0],
				4, d, gs, st.ms, metaLanes(d, gs), nb, &red[0])
			continue
		}
		q4ScoresAVX2(&st.sc[hb*blockTokens], &st.q[hb*d], &st.qsI[hb*st.ms], &codes[0], &st.metaK[0],
			st.g-hb, d, gs, st.ms, metaLanes(d, gs), nb)
	}
}

func q8ScoresSIMD(st *slot, codes []uint8, nb, gs int) {
	d := st.d
	if metaLanes(d, gs) > maxSIMDLanes {
		q8ScoresGo(st, codes, nb, gs)
		return
	}
	_ = codes[nb*d-1]
	red := st.vbuf[:4*blockTokens*8] // free until the V step
	for hb := 0; hb < st.g; hb += 4 {
		if st.g-hb >= 4 {
			q8Scores4AVX2(&st.sc[hb*blockTokens], &st.q[hb*d], &st.qsI[hb*st.ms], &codes[0], &st.metaK[0],
				4, d, gs, st.ms, metaLanes(d, gs), nb, &red[0])
			continue
		}
		q8ScoresAVX2(&st.sc[hb*blockTokens], &st.q[hb*d], &st.qsI[hb*st.ms], &codes[0], &st.metaK[0],
			st.g-hb, d, gs, st.ms, metaLanes(d, gs), nb)
	}
}

// codeAccV: o += (p·s)·n + p·b per head. Quads of heads take the codes
// straight into registers (q4AccV4AVX2); otherwise the block's codes become
// floats once (vbuf) and every head accumulates from them.
func q4AccVSIMD(st *slot, codes []uint32, nb, gs int) {
	d := st.d
	if metaLanes(d, gs) > maxSIMDLanes {
		q4AccV(st, codes, nb, gs, true)
		return
	}
	_ = codes[nb*d/8-1]
	quads := st.g / 4
	if quads == 0 || d%16 != 0 {
		_ = st.vbuf[nb*d-1]
		q4UnpackAVX2(&st.vbuf[0], &codes[0], nb*d/32)
		codeAccVSIMD(st, d, gs, nb)
		return
	}
	// Quads of heads read the codes directly; the rest (G not a multiple
	// of 4) from a block unpacked once.
	codeWSIMD(st, gs, nb)
	rows := (blockTokens + 1) * st.ms
	q4AccV4AVX2(&st.o[0], &codes[0], &st.wbuf[0], quads, d, gsLog(gs), st.ms, nb)
	if rest := st.g - 4*quads; rest > 0 {
		_ = st.vbuf[nb*d-1]
		q4UnpackAVX2(&st.vbuf[0], &codes[0], nb*d/32)
		codeAccVAVX2(&st.o[4*quads*d], &st.vbuf[0], &st.wbuf[4*quads*rows], rest, d, gsLog(gs), st.ms, nb)
	}
}

// codeWSIMD fills st.wbuf with every head's V weights and their sums.
func codeWSIMD(st *slot, gs, nb int) {
	lanes, rows := metaLanes(st.d, gs), (blockTokens+1)*st.ms
	_ = st.wbuf[st.g*rows-1]
	for hb := 0; hb < st.g; hb += 4 {
		codeWAVX2(&st.wbuf[hb*rows], &st.sc[hb*blockTokens], &st.metaV[0], min(4, st.g-hb), st.ms, lanes, nb)
	}
}

func q8AccVSIMD(st *slot, codes []uint8, nb, gs int) {
	d := st.d
	if metaLanes(d, gs) > maxSIMDLanes {
		q8AccVGo(st, codes, nb, gs)
		return
	}
	_ = codes[nb*d-1]
	_ = st.vbuf[nb*d-1]
	q8UnpackAVX2(&st.vbuf[0], &codes[0], nb*d/32)
	codeAccVSIMD(st, d, gs, nb)
}

// codeAccVSIMD runs the V weights (per head p·{scale, bias}, 4 heads a pass)
// and then the accumulation over st.vbuf.
func codeAccVSIMD(st *slot, d, gs, nb int) {
	codeWSIMD(st, gs, nb)
	codeAccVAVX2(&st.o[0], &st.vbuf[0], &st.wbuf[0], st.g, d, gsLog(gs), st.ms, nb)
}

func f16ScoresSIMD(st *slot, k []uint16, nb int) {
	d := st.d
	_ = k[nb*d-1]
	for hb := 0; hb < st.g; hb += 4 {
		kernel := f16ScoresAVX2
		if st.g-hb >= 4 {
			kernel = f16Scores4AVX2
		}
		kernel(&st.sc[hb*blockTokens], &st.q[hb*d], &k[0], min(4, st.g-hb), d, nb)
	}
}

func f16AccVSIMD(st *slot, v []uint16, nb int) {
	d := st.d
	_ = v[nb*d-1]
	_ = st.vbuf[nb*d-1]
	f16ToF32AVX(&st.vbuf[0], &v[0], nb*d/8)
	floatAccVAVX2(&st.o[0], &st.sc[0], &st.vbuf[0], st.g, d, nb, d)
}

func f32ScoresSIMD(st *slot, k []float32, nb int) {
	d := st.d
	_ = k[nb*d-1]
	for hb := 0; hb < st.g; hb += 4 {
		kernel := f32ScoresAVX2
		if st.g-hb >= 4 {
			kernel = f32Scores4AVX2
		}
		kernel(&st.sc[hb*blockTokens], &st.q[hb*d], &k[0], min(4, st.g-hb), d, nb)
	}
}

func f32AccVSIMD(st *slot, v []float32, nb int) {
	d := st.d
	_ = v[nb*d-1]
	floatAccVAVX2(&st.o[0], &st.sc[0], &v[0], st.g, d, nb, d)
}

// softmaxSIMD pads short blocks with -Inf (probability 0) so the kernel
// always works on 32 scores per head.
func softmaxSIMD(sc, ml, o []float32, g, d, nb int) {
	_ = sc[g*blockTokens-1]
	_ = ml[2*g-1]
	_ = o[g*d-1]
	if nb < blockTokens {
		for j := 0; j < g; j++ {
			s := sc[j*blockTokens+nb : (j+1)*blockTokens]
			for i := range s {
				s[i] = negInf
			}
		}
	}
	softmaxAVX2(&sc[0], &ml[0], &o[0], g, d)
}

func dotSIMD(a, b []float32) float32 {
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		_ = b[n-1]
		s = dotAVX2(&a[0], &b[0], n)
	}
	for i := n; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

func axpySIMD(y []float32, a float32, x []float32) {
	n := len(y) &^ 7
	if n > 0 {
		_ = x[n-1]
		axpyAVX2(&y[0], a, &x[0], n)
	}
	for i := n; i < len(y); i++ {
		y[i] += a * x[i]
	}
}
