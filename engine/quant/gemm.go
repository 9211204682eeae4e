package quant

import (
	"sync"

	"nibble/engine/parallel"
)

// The prefill GEMM: 16 weight rows × 16 activation rows per kernel call, so
// that every weight block loaded is used against 16 activation rows and
// every activation block against 16 weight rows (matMatRows' dot4 kernels reuse
// a weight block for four activation rows and reload the activations for
// every weight row). A group of 16 weight rows is first repacked
// (gemmKernel.pack) so that one vector register holds the same 4 bytes of all
// 16 rows; the activations are laid out per tile of 16 rows (acts.tile*).
//
// Each output is Σ_b float(isum_b)·(dw_b·dy_b), accumulated block by block
// with FMA. The integer sums isum_b are exactly those of the other Q4_0
// kernels; only the float summation order differs from dot4's, whose lanes
// hold partial sums that are added at the end.

const (
	gemmRows = 16 // weight rows per group and activation rows per tile
	// gemmMinActs is the least activation rows for which the GEMM pays:
	// below it the padding of the one tile costs more than dot4.
	gemmMinActs = 16
)

// gemmKernel is a weight type's prefill GEMM.
type gemmKernel struct {
	// groupBytes is the size of a packed group of 16 rows of nb blocks.
	groupBytes func(nb int) int
	// pack writes the 16 rows of w (rb bytes each) into dst in the
	// kernel's layout.
	pack func(dst, w []byte, rb, nb int)
	// tile computes s.out[j*16+r] = dot(row r of the packed group, row j
	// of activation tile t).
	tile func(packed []byte, nb int, a *acts, t int, s *gemmScratch)
}

// gemmScratch is one worker's packed weight group and tile results.
type gemmScratch struct {
	packed []byte
	out    [gemmRows * gemmRows]float32
	c      [3 * gemmRows * gemmRows]int32 // the AMX kernel's integer tiles
}

var gemmScratchPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// matGemm computes the first rows16 rows of w (a multiple of 16) against
// all n activation rows, which a.prepare laid out in tiles.
func matGemm(pool *parallel.Pool, dst []float32, w Matrix, rb int, a *acts, g *gemmKernel, n, rows16 int) {
	nb := a.nb
	gb := g.groupBytes(nb)
	tiles := (n + gemmRows - 1) / gemmRows
	pool.For(rows16/gemmRows, 1, func(lo, hi int) {
		s := gemmScratchPool.Get().(*gemmScratch)
		s.packed = grow(s.packed, gb)
		for grp := lo; grp < hi; grp++ {
			r0 := grp * gemmRows
			g.pack(s.packed, w.Data[r0*rb:(r0+gemmRows)*rb], rb, nb)
			for t := 0; t < tiles; t++ {
				g.tile(s.packed, nb, a, t, s)
				for j := 0; j < gemmRows && t*gemmRows+j < n; j++ {
					i := t*gemmRows + j
					copy(dst[i*w.Rows+r0:i*w.Rows+r0+gemmRows], s.out[j*gemmRows:(j+1)*gemmRows])
				}
			}
		}
		gemmScratchPool.Put(s)
	})
}

// q4_0GroupBytes: per block, 4×64 bytes of nibbles and 16 fp16 scales;
// the same size as the 16 rows' blocks themselves. The layout is
// packQ4_0GroupGo's (gemm_test.go).
func q4_0GroupBytes(nb int) int { return nb * gemmRows * 18 }

// buildTileRow copies activation row i (already quantized) into its tile:
// per tile t and block b, the 16 rows' 32 quants, then their scales dy and
// offset corrections -tileCorr·Σq.
func (a *acts) buildTileRow(i int) {
	nb, c := a.nb, a.cols
	t, j := i/gemmRows, i%gemmRows
	for b := 0; b < nb; b++ {
		slot := (t*nb+b)*gemmRows + j
		copy(a.tq[slot*32:slot*32+32], a.qs[i*c+b*32:i*c+b*32+32])
		a.td[slot] = a.d[i*nb+b]
		a.tc[slot] = -a.tileCorr * a.sum[i*nb+b]
	}
}

// clearTilePad zeroes the rows of the last tile past n: zero quants and
// scales make their products zero, which are computed and dropped.
func (a *acts) clearTilePad(n int) {
	nb := a.nb
	for i := n; i%gemmRows != 0; i++ {
		t, j := i/gemmRows, i%gemmRows
		for b := 0; b < nb; b++ {
			slot := (t*nb+b)*gemmRows + j
			clear(a.tq[slot*32 : slot*32+32])
			a.td[slot], a.tc[slot] = 0, 0
		}
	}
}
