package quant

import (
	"math"

	"nibble/engine/half"
	"nibble/engine/parallel"
)

// actKind is the form a weight type's dot product wants its activations in
// (ggml's vec_dot_type).
type actKind uint8

const (
	actF32  actKind = iota
	actF16          // rounded to fp16 (kept as float32)
	actBF16         // rounded to bf16 (kept as float32)
	actQ8_0         // 32-blocks, fp16 scale
	actQ8_1         // Q8_0 plus s = fp16(d·Σq)
	actQ8_K         // 256-blocks, f32 scale, Σq per 16
)

// acts holds one MatMul call's activation rows, converted once.
type acts struct {
	kind  actKind
	cols  int       // elements per row
	nb    int       // blocks per row (of 32, or 256 for Q8_K)
	f     []float32 // F32/F16/BF16: n×cols values (for F32 the caller's x)
	fbuf  []float32 // storage of f for F16/BF16
	qs    []int8    // quantized kinds: n×cols
	d     []float32 // scale per block (Q8_0/Q8_1: the fp16 value)
	s     []float32 // Q8_1: fp16(d·Σq) per block
	sum   []int32   // Q8_0: Σq per block (offset correction of unsigned weights)
	bsums []int16   // Q8_K: Σq per 16 elements

	// The pair layout of 32-block rows for the AVX2 Q4_0/Q4_1/Q5_0/Q5_1
	// kernels (see buildPairs); empty unless the kernel asks for it.
	pairs    bool
	pairCorr int32     // offset correction per lane, in units of Σy
	np       int       // pairs per row: ceil(nb/2)
	px       []int8    // 64 bytes per pair
	pd       []float32 // 8 per pair: dy of A ×4, of B ×4
	pc       []int32   // 8 per pair: pairCorr·Σy of A ×4, of B ×4
	ps       []float32 // 8 per pair (Q8_1): s/4 of A ×4, of B ×4

	// The tile layout of the prefill GEMM (gemm.go): rows in tiles of 16,
	// per tile and block the 16 rows' quants (32 bytes each), scales and
	// offset corrections -tileCorr·Σq. Empty unless prepare was asked for it.
	tiled    bool
	tileCorr int32
	tq       []int8
	td       []float32
	tc       []int32
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prepare converts n rows of x (cols wide) into a.kind's form, for a
// matrix of rows rows.
func (a *acts) prepare(pool *parallel.Pool, k *kernel, x []float32, n, rows, cols int) {
	kind := k.act
	a.kind, a.cols, a.pairCorr = kind, cols, k.pairCorr
	a.tiled, a.tileCorr = k.gemm != nil && n >= gemmMinActs && rows >= gemmRows, k.tileCorr
	// The pair layout serves the dot kernels, which the GEMM leaves only the
	// rows past the last whole group of 16.
	a.pairs = k.pairs && !(a.tiled && rows%gemmRows == 0)
	x = x[:n*cols]
	switch kind {
	case actF32:
		a.f = x // used as is
		return
	case actF16, actBF16:
		a.fbuf = grow(a.fbuf, n*cols)
		a.f = a.fbuf
	case actQ8_K:
		a.nb = cols / 256
		a.qs = grow(a.qs, n*cols)
		a.d = grow(a.d, n*a.nb)
		a.bsums = grow(a.bsums, n*cols/16)
	default:
		a.nb = cols / 32
		a.qs = grow(a.qs, n*cols)
		a.d = grow(a.d, n*a.nb)
		a.s = grow(a.s, n*a.nb)
		a.sum = grow(a.sum, n*a.nb)
		if a.pairs {
			a.np = (a.nb + 1) / 2
			a.px = grow(a.px, n*a.np*64)
			a.pd = grow(a.pd, n*a.np*8)
			a.pc = grow(a.pc, n*a.np*8)
			a.ps = grow(a.ps, n*a.np*8)
		}
		if a.tiled {
			padded := (n + gemmRows - 1) / gemmRows * gemmRows
			a.tq = grow(a.tq, padded*cols)
			a.td = grow(a.td, padded*a.nb)
			a.tc = grow(a.tc, padded*a.nb)
			a.clearTilePad(n)
		}
	}
	// Rows are independent; a lone row is too small to split.
	if n == 1 {
		a.convertRows(x, 0, 1)
		return
	}
	pool.For(n, 0, func(lo, hi int) { a.convertRows(x, lo, hi) })
}

func (a *acts) convertRows(x []float32, lo, hi int) {
	c := a.cols
	for i := lo; i < hi; i++ {
		row := x[i*c : (i+1)*c]
		switch a.kind {
		case actF16:
			roundF16(a.f[i*c:(i+1)*c], row)
		case actBF16:
			out := a.f[i*c : (i+1)*c]
			for j, v := range row {
				out[j] = half.BF16ToFloat32(half.BF16FromFloat32(v))
			}
		case actQ8_K:
			quantizeQ8KRow(a.qs[i*c:(i+1)*c], a.d[i*a.nb:(i+1)*a.nb], a.bsums[i*c/16:(i+1)*c/16], row)
		default:
			nb := a.nb
			quantizeQ8Row(a.qs[i*c:(i+1)*c], a.d[i*nb:(i+1)*nb], a.s[i*nb:(i+1)*nb], a.sum[i*nb:(i+1)*nb], row)
			if a.pairs {
				a.buildPairs(i)
			}
			if a.tiled {
				a.buildTileRow(i)
			}
		}
	}
}

// The row converters; the architecture's SIMD init may replace them with
// bit-identical versions.
var (
	quantizeQ8Row  = quantizeQ8Act
	quantizeQ8KRow = quantizeQ8K
	roundF16       = roundF16Go
)

func roundF16Go(dst, src []float32) {
	for j, v := range src {
		dst[j] = half.Round(v)
	}
}

// nearestInt rounds to the nearest integer, ties to even, for |f| < 2^22
// (ggml's nearest_int): adding 1.5·2^23 leaves the integer in the low
// mantissa bits.
func nearestInt(f float32) int32 {
	return int32(math.Float32bits(f+12582912)&0x7fffff) - 0x400000
}

// quantizeQ8Act is ggml's AVX2 quantize_row_q8_0 / q8_1 (the path the
// reference logits ran): d = amax/127 stored as fp16, q = round-to-even(x ·
// 127/amax). It also records Σq and the Q8_1 term s = fp16(d·Σq), with d
// unrounded as ggml does.
func quantizeQ8Act(qs []int8, d, s []float32, sum []int32, x []float32) {
	for b := range d {
		xb, qb := x[b*32:b*32+32], qs[b*32:b*32+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		scale := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var total int32
		for j, v := range xb {
			// float32() keeps the product from fusing with the add inside.
			q := nearestInt(float32(v * id))
			q = min(127, max(-128, q)) // VPACKSS saturation; unreachable for finite x
			qb[j] = int8(q)
			total += q
		}
		d[b] = half.Round(scale)
		s[b] = half.Round(scale * float32(total))
		sum[b] = total
	}
}

// quantizeQ8K is quantize_row_q8_K_ref: the signed value of largest
// magnitude maps to -127, d = 1/iscale (f32), q = nearest(iscale·x) ≤ 127.
func quantizeQ8K(qs []int8, d []float32, bsums []int16, x []float32) {
	for b := range d {
		xb, qb, bs := x[b*256:b*256+256], qs[b*256:b*256+256], bsums[b*16:b*16+16]
		var amax, mx float32
		for _, v := range xb {
			if a := abs32(v); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(qb)
			clear(bs)
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			qb[j] = int8(min(127, max(-128, nearestInt(float32(iscale*v)))))
		}
		for j := range bs {
			var t int16
			for _, q := range qb[16*j : 16*j+16] {
				t += int16(q)
			}
			bs[j] = t
		}
		d[b] = 1 / iscale
	}
}

// buildPairs lays row i out for kernels that take two blocks A, B at once,
// one per 128-bit lane: per pair, the activations of the low nibbles
// [A 0..15, B 0..15], then of the high nibbles [A 16..31, B 16..31]; then
// dy, pairCorr·Σy and s/4 as 4 copies each (a block's lanes sum to its
// value). An odd last block pairs with zeros.
func (a *acts) buildPairs(i int) {
	nb, np := a.nb, a.np
	qs, d, s, sum := a.qs[i*a.cols:(i+1)*a.cols], a.d[i*nb:(i+1)*nb], a.s[i*nb:(i+1)*nb], a.sum[i*nb:(i+1)*nb]
	px, pd, pc, ps := a.px[i*np*64:(i+1)*np*64], a.pd[i*np*8:(i+1)*np*8], a.pc[i*np*8:(i+1)*np*8], a.ps[i*np*8:(i+1)*np*8]
	for p := 0; p < np; p++ {
		for h := 0; h < 2; h++ { // h = 0: block A, 1: block B
			b := 2*p + h
			y, dy, c, sq := zeroBlock[:], float32(0), int32(0), float32(0)
			if b < nb {
				y, dy, c, sq = qs[b*32:b*32+32], d[b], a.pairCorr*sum[b], s[b]/4
			}
			copy(px[p*64+16*h:], y[:16])
			copy(px[p*64+32+16*h:], y[16:])
			for k := 0; k < 4; k++ {
				pd[p*8+4*h+k] = dy
				pc[p*8+4*h+k] = c
				ps[p*8+4*h+k] = sq
			}
		}
	}
}

var zeroBlock [32]int8

// gather makes a the rows src[from(i)] for i < n of activations src
// already converted (no tile layout): every buffer of src's kind, row by
// row, so a row used by several slots is converted once.
func (a *acts) gather(pool *parallel.Pool, src *acts, n int, from func(i int) int) {
	*a = acts{kind: src.kind, cols: src.cols, nb: src.nb, pairs: src.pairs, pairCorr: src.pairCorr, np: src.np,
		fbuf: a.fbuf, qs: a.qs, d: a.d, s: a.s, sum: a.sum, bsums: a.bsums, px: a.px, pd: a.pd, pc: a.pc, ps: a.ps,
		tq: a.tq, td: a.td, tc: a.tc}
	c, nb, np := a.cols, a.nb, a.np
	switch a.kind {
	case actF32, actF16, actBF16:
		a.fbuf = grow(a.fbuf, n*c)
		a.f = a.fbuf
	case actQ8_K:
		a.qs, a.d, a.bsums = grow(a.qs, n*c), grow(a.d, n*nb), grow(a.bsums, n*c/16)
	default:
		a.qs, a.d, a.s, a.sum = grow(a.qs, n*c), grow(a.d, n*nb), grow(a.s, n*nb), grow(a.sum, n*nb)
		if a.pairs {
			a.px, a.pd, a.pc, a.ps = grow(a.px, n*np*64), grow(a.pd, n*np*8), grow(a.pc, n*np*8), grow(a.ps, n*np*8)
		}
	}
	rows := func(dst, src []int8, w, i, j int) { copy(dst[i*w:(i+1)*w], src[j*w:(j+1)*w]) }
	pool.For(n, 0, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			j := from(i)
			switch a.kind {
			case actF32, actF16, actBF16:
				copy(a.f[i*c:(i+1)*c], src.f[j*c:(j+1)*c])
			case actQ8_K:
				rows(a.qs, src.qs, c, i, j)
				copy(a.d[i*nb:(i+1)*nb], src.d[j*nb:(j+1)*nb])
				copy(a.bsums[i*c/16:(i+1)*c/16], src.bsums[j*c/16:(j+1)*c/16])
			default:
				rows(a.qs, src.qs, c, i, j)
				copy(a.d[i*nb:(i+1)*nb], src.d[j*nb:(j+1)*nb])
				copy(a.s[i*nb:(i+1)*nb], src.s[j*nb:(j+1)*nb])
				copy(a.sum[i*nb:(i+1)*nb], src.sum[j*nb:(j+1)*nb])
				if a.pairs {
					rows(a.px, src.px, np*64, i, j)
					copy(a.pd[i*np*8:(i+1)*np*8], src.pd[j*np*8:(j+1)*np*8])
					copy(a.pc[i*np*8:(i+1)*np*8], src.pc[j*np*8:(j+1)*np*8])
					copy(a.ps[i*np*8:(i+1)*np*8], src.ps[j*np*8:(j+1)*np*8])
				}
			}
		}
	})
}
