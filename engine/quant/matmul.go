package quant

import (
	"fmt"
	"sync"

	"nibble/engine/parallel"
)

// scratch holds the quantized activations of one MatMul call; pooled so
// that steady-state decoding allocates nothing per call for them.
var scratch = sync.Pool{New: func() any { return new(acts) }}

// MatMul computes dst[i*w.Rows + r] = dot(row r of w, x[i*w.Cols:(i+1)*w.Cols])
// for i < n. x and dst may be longer than n rows. It fails only for an
// unsupported type or inconsistent sizes. pool nil means parallel.Default().
func MatMul(pool *parallel.Pool, dst []float32, w Matrix, x []float32, n int) error {
	return matMul(pool, dst, w, x, n, &kernelsActive)
}

func matMul(pool *parallel.Pool, dst []float32, w Matrix, x []float32, n int, tbl *kernelTable) error {
	rb, err := w.check()
	if err != nil {
		return err
	}
	switch {
	case n < 0:
		return fmt.Errorf("quant: matmul of %d rows", n)
	case n == 0:
		return nil
	case n > len(x)/w.Cols:
		return fmt.Errorf("quant: matmul of %d rows of %d needs %d inputs, have %d", n, w.Cols, n*w.Cols, len(x))
	case n > len(dst)/w.Rows:
		return fmt.Errorf("quant: matmul of %d rows of %d needs %d outputs, have %d", n, w.Rows, n*w.Rows, len(dst))
	}
	if pool == nil {
		pool = parallel.Default()
	}
	k := &tbl[w.Type]
	a := scratch.Get().(*acts)
	a.prepare(pool, k, x, n, w.Rows, w.Cols)
	switch {
	case n == 1:
		matVec(pool, dst, w, rb, a, k)
	case a.tiled:
		rows16 := w.Rows / gemmRows * gemmRows
		matGemm(pool, dst, w, rb, a, k.gemm, n, rows16)
		if rows16 < w.Rows {
			matMatRows(pool, dst, w, rb, a, k, n, rows16)
		}
	default:
		matMatRows(pool, dst, w, rb, a, k, n, 0)
	}
	a.f = nil // do not keep the caller's x alive
	scratch.Put(a)
	return nil
}

// matVec is the decode case: rows split over the pool.
func matVec(pool *parallel.Pool, dst []float32, w Matrix, rb int, a *acts, k *kernel) {
	grain := max(16, w.Rows/(8*pool.Threads()))
	pool.For(w.Rows, grain, func(lo, hi int) { k.dotRows(w.Data[lo*rb:hi*rb], rb, a, 0, dst[lo:hi]) })
}

// dotRows is dst[r] = dot(row r of w, activation row i) for every row of w.
func (k *kernel) dotRows(w []byte, rb int, a *acts, i int, dst []float32) {
	if k.rows != nil {
		k.rows(w, rb, a, i, dst)
		return
	}
	for r := range dst {
		dst[r] = k.dot1(w[r*rb:(r+1)*rb], a, i)
	}
}

// matMatRows is the prefill case without a GEMM. The work is cut into tiles of weight rows ×
// activation rows; a weight tile small enough for L2 is reused across the
// activation rows of its tile, and dot4 reads each weight block once for
// four activation rows.
// Weight rows below first are left alone (the GEMM did them).
func matMatRows(pool *parallel.Pool, dst []float32, w Matrix, rb int, a *acts, k *kernel, n, first int) {
	const xTile = 64
	rowTile := min(256, max(4, (256<<10)/rb))
	rows := w.Rows - first
	xTiles := (n + xTile - 1) / xTile
	// Enough tiles for every thread, even for short matrices.
	for rowTile > 4 && ((rows+rowTile-1)/rowTile)*xTiles < 4*pool.Threads() {
		rowTile /= 2
	}
	rowTiles := (rows + rowTile - 1) / rowTile
	pool.For(rowTiles*xTiles, 1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r0, i0 := first+t/xTiles*rowTile, t%xTiles*xTile
			r1, i1 := min(r0+rowTile, w.Rows), min(i0+xTile, n)
			i := i0
			if k.dot4 != nil {
				for ; i+4 <= i1; i += 4 {
					for r := r0; r < r1; r++ {
						k.dot4(w.Data[r*rb:(r+1)*rb], a, i, dst[i*w.Rows+r:], w.Rows)
					}
				}
			}
			for ; i < i1; i++ {
				k.dotRows(w.Data[r0*rb:r1*rb], rb, a, i, dst[i*w.Rows+r0:i*w.Rows+r1])
			}
		}
	})
}
