package quant

import (
	"fmt"
	"sync"

	"nibble/engine/parallel"
)

// idScratch holds a batch's grouping of slots by expert and the gathered
// rows of one expert; pooled like the activations.
type idScratch struct {
	count, start []int
	order        []int     // slots sorted by expert, in slot order within one
	x, y         []float32 // gathered input rows (and one expert's results)
	tiles        []idTile
}

var idScratchPool = sync.Pool{New: func() any { return new(idScratch) }}

// MatMulID is the matmul of a mixture of experts (ggml's mul_mat_id). w
// stacks experts matrices of m = w.Rows/experts rows each; for each of the
// rows·k slots s (token s/k and its chosen expert e = ids[s]) it computes
// dst[s·m + r] = dot(row r of expert e, x row), x row being s/k (one input
// per token, shared by its k slots) or s (xPerSlot). Only the chosen
// experts' rows are read. One token's slots are split over the pool with
// its input converted once; a batch is grouped by expert and each chosen
// expert's matrix multiplies all of its rows at once, as MatMul does (the
// GEMM for 16 rows or more where there is one, else tiles reusing each
// weight block for four rows), so it is read once per batch.
func MatMulID(pool *parallel.Pool, dst []float32, w Matrix, experts int, x []float32, ids []int32, rows, k int, xPerSlot bool) error {
	return matMulID(pool, dst, w, experts, x, ids, rows, k, xPerSlot, &kernelsActive)
}

func matMulID(pool *parallel.Pool, dst []float32, w Matrix, experts int, x []float32, ids []int32, rows, k int, xPerSlot bool, tbl *kernelTable) error {
	rb, err := w.check()
	if err != nil {
		return err
	}
	if experts <= 0 || w.Rows%experts != 0 {
		return fmt.Errorf("quant: matmul-id: %d rows is not %d experts' matrices", w.Rows, experts)
	}
	m := w.Rows / experts
	slots := rows * k
	nx := rows
	if xPerSlot {
		nx = slots
	}
	switch {
	case rows < 0 || k <= 0:
		return fmt.Errorf("quant: matmul-id of %d rows of %d slots", rows, k)
	case rows == 0:
		return nil
	case len(ids) < slots:
		return fmt.Errorf("quant: matmul-id of %d slots has %d ids", slots, len(ids))
	case nx > len(x)/w.Cols:
		return fmt.Errorf("quant: matmul-id of %d rows of %d needs %d inputs, have %d", nx, w.Cols, nx*w.Cols, len(x))
	case slots > len(dst)/m:
		return fmt.Errorf("quant: matmul-id of %d slots of %d needs %d outputs, have %d", slots, m, slots*m, len(dst))
	}
	for s, e := range ids[:slots] {
		if e < 0 || int(e) >= experts {
			return fmt.Errorf("quant: matmul-id: slot %d chooses expert %d of %d", s, e, experts)
		}
	}
	if pool == nil {
		pool = parallel.Default()
	}
	switch {
	case rows == 1:
		matVecID(pool, dst, w, rb, m, x, ids[:slots], nx, k, xPerSlot, &tbl[w.Type])
	case tbl[w.Type].gemm != nil:
		return matMatID(pool, dst, w, rb, m, experts, x, ids[:slots], k, xPerSlot, tbl)
	default:
		matRowsID(pool, dst, w, rb, m, experts, x, ids[:slots], k, xPerSlot, &tbl[w.Type])
	}
	return nil
}

// group sorts a batch's slots by expert: sc.order lists them expert by
// expert (slot order within one), sc.start[e] is where expert e's begin
// and sc.count[e] how many; it returns the largest count.
func (sc *idScratch) group(ids []int32, experts int) int {
	sc.count, sc.start = grow(sc.count, experts), grow(sc.start, experts)
	clear(sc.count)
	for _, e := range ids {
		sc.count[e]++
	}
	most, at := 0, 0
	for e, c := range sc.count {
		sc.start[e] = at
		at += c
		most = max(most, c)
	}
	sc.order = grow(sc.order, len(ids))
	for s, e := range ids {
		sc.order[sc.start[e]] = s
		sc.start[e]++
	}
	for e, c := range sc.count {
		sc.start[e] -= c
	}
	return most
}

// idTile is one work item of matRowsID: rows [r0, r1) of expert e against
// its grouped activation rows [i0, i1).
type idTile struct{ e, r0, r1, i0, i1 int }

// matRowsID is a batch without a GEMM: the input rows converted once and
// gathered in expert order, then every chosen expert's tiles of weight
// rows × its activation rows in one parallel loop (matMatRows' tiling: a
// weight tile small enough for L2 reused across up to 64 rows, dot4 reading
// each weight block once for four), the results written to their slots.
func matRowsID(pool *parallel.Pool, dst []float32, w Matrix, rb, m, experts int, x []float32, ids []int32, k int, xPerSlot bool, kern *kernel) {
	sc := idScratchPool.Get().(*idScratch)
	defer idScratchPool.Put(sc)
	sc.group(ids, experts)
	slots, c := len(ids), w.Cols
	nx := slots / k
	if xPerSlot {
		nx = slots
	}
	kc := *kern
	kc.gemm = nil
	// Each input row converted once, then gathered in expert order.
	in, a := scratch.Get().(*acts), scratch.Get().(*acts)
	in.prepare(pool, &kc, x, nx, m, c)
	a.gather(pool, in, slots, func(i int) int {
		if xPerSlot {
			return sc.order[i]
		}
		return sc.order[i] / k
	})
	in.f = nil
	scratch.Put(in)
	const xTile = 64
	rowTile := min(m, 256, max(4, (256<<10)/rb))
	sc.tiles = sc.tiles[:0]
	for e, n := range sc.count {
		for i0 := sc.start[e]; i0 < sc.start[e]+n; i0 += xTile {
			for r0 := 0; r0 < m; r0 += rowTile {
				sc.tiles = append(sc.tiles, idTile{e, r0, min(r0+rowTile, m), i0, min(i0+xTile, sc.start[e]+n)})
			}
		}
	}
	order := sc.order
	pool.For(len(sc.tiles), 1, func(lo, hi int) {
		var out [4]float32
		for _, t := range sc.tiles[lo:hi] {
			base := t.e * m
			i := t.i0
			if kc.dot4 != nil {
				for ; i+4 <= t.i1; i += 4 {
					s0, s1, s2, s3 := order[i]*m, order[i+1]*m, order[i+2]*m, order[i+3]*m
					for r := t.r0; r < t.r1; r++ {
						kc.dot4(w.Data[(base+r)*rb:(base+r+1)*rb], a, i, out[:], 1)
						dst[s0+r], dst[s1+r], dst[s2+r], dst[s3+r] = out[0], out[1], out[2], out[3]
					}
				}
			}
			for ; i < t.i1; i++ {
				s := order[i] * m
				kc.dotRows(w.Data[(base+t.r0)*rb:(base+t.r1)*rb], rb, a, i, dst[s+t.r0:s+t.r1])
			}
		}
	})
	a.f = nil
	scratch.Put(a)
}

// matVecID is one token's slots: its input rows converted once, then every
// chosen expert's rows split over the pool.
func matVecID(pool *parallel.Pool, dst []float32, w Matrix, rb, m int, x []float32, ids []int32, nx, k int, xPerSlot bool, kern *kernel) {
	kc := *kern
	kc.gemm = nil // a row at a time
	a := scratch.Get().(*acts)
	a.prepare(pool, &kc, x, nx, m, w.Cols)
	slots := len(ids)
	grain := min(m, max(16, slots*m/(8*pool.Threads())))
	chunks := (m + grain - 1) / grain
	pool.For(slots*chunks, 1, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			s, c := it/chunks, it%chunks
			r0, r1 := c*grain, min((c+1)*grain, m)
			xi := s / k
			if xPerSlot {
				xi = s
			}
			base := int(ids[s]) * m
			kc.dotRows(w.Data[(base+r0)*rb:(base+r1)*rb], rb, a, xi, dst[s*m+r0:s*m+r1])
		}
	})
	a.f = nil
	scratch.Put(a)
}

// matMatID is a batch where the weight type has a GEMM: each chosen
// expert's matrix times its gathered input rows in one dense matmul (the
// GEMM for groups of 16 rows or more).
func matMatID(pool *parallel.Pool, dst []float32, w Matrix, rb, m, experts int, x []float32, ids []int32, k int, xPerSlot bool, tbl *kernelTable) error {
	sc := idScratchPool.Get().(*idScratch)
	defer idScratchPool.Put(sc)
	most := sc.group(ids, experts)
	c := w.Cols
	sc.x, sc.y = grow(sc.x, most*c), grow(sc.y, most*m)
	at := 0
	for e, n := range sc.count {
		if n == 0 {
			continue
		}
		group := sc.order[at : at+n]
		at += n
		for i, s := range group {
			xi := s / k
			if xPerSlot {
				xi = s
			}
			copy(sc.x[i*c:(i+1)*c], x[xi*c:(xi+1)*c])
		}
		sub := Matrix{Type: w.Type, Rows: m, Cols: c, Data: w.Data[e*m*rb : (e+1)*m*rb]}
		if err := matMul(pool, sc.y, sub, sc.x, n, tbl); err != nil {
			return err
		}
		for i, s := range group {
			copy(dst[s*m:(s+1)*m], sc.y[i*m:(i+1)*m])
		}
	}
	return nil
}
