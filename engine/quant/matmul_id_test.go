package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/parallel"
)

// chooseExperts picks k distinct experts per token; with force set every
// token's first is expert 0, so a batch of 16 tokens or more gives expert 0
// a GEMM-sized group, and the last expert is never chosen.
func chooseExperts(rng *rand.Rand, rows, k, experts int, force bool) []int32 {
	ids := make([]int32, 0, rows*k)
	for r := 0; r < rows; r++ {
		perm := rng.Perm(experts - 1)
		if force {
			for i, e := range perm {
				if e == 0 {
					perm[0], perm[i] = perm[i], perm[0]
				}
			}
		}
		for j := 0; j < k; j++ {
			ids = append(ids, int32(perm[j]))
		}
	}
	return ids
}

// MatMulID against a plain reference: every slot's expert matrix
// dequantized in float64 times its input row, within the activation
// rounding bound of MatMul's own test; one token's slots are also exactly
// MatMul of the expert's matrix (the same kernels, the same conversion).
func TestMatMulIDMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	pool := parallel.NewPool(2)
	defer pool.Close()
	const experts, m, k = 5, 9, 3
	for _, typ := range ggmltest.WeightTypes {
		cols := colsFor(typ)[1]
		rb := typ.RowBytes(cols)
		w := Matrix{Type: typ, Rows: experts * m, Cols: cols, Data: ggmltest.RandomWeights(rng, typ, experts*m, cols, 0.5)}
		deq := make([][]float64, w.Rows)
		for r := range deq {
			deq[r] = refDequant(typ, w.Data[r*rb:(r+1)*rb], cols)
		}
		for _, rows := range []int{1, 3, 20} {
			for _, perSlot := range []bool{false, true} {
				ids := chooseExperts(rng, rows, k, experts, rows > 16)
				nx := rows
				if perSlot {
					nx = rows * k
				}
				x := randomVector(rng, nx*cols, 1)
				dst := make([]float32, rows*k*m)
				if err := MatMulID(pool, dst, w, experts, x, ids, rows, k, perSlot); err != nil {
					t.Fatalf("%s rows %d: %v", typ, rows, err)
				}
				// The per-expert path that machines with a GEMM take, whether
				// or not this one has it.
				grouped := make([]float32, rows*k*m)
				if err := matMatID(pool, grouped, w, rb, m, experts, x, ids, k, perSlot, &kernelsActive); err != nil {
					t.Fatal(err)
				}
				for _, dst := range [][]float32{dst, grouped} {
					for s, e := range ids {
						xi := s / k
						if perSlot {
							xi = s
						}
						xrow := x[xi*cols : (xi+1)*cols]
						x64 := make([]float64, cols)
						for j, v := range xrow {
							x64[j] = float64(v)
						}
						var one []float32
						if rows == 1 {
							one = make([]float32, m)
							sub := Matrix{Type: typ, Rows: m, Cols: cols, Data: w.Data[int(e)*m*rb : (int(e)+1)*m*rb]}
							if err := MatMul(pool, one, sub, xrow, 1); err != nil {
								t.Fatal(err)
							}
						}
						for r := 0; r < m; r++ {
							wr := deq[int(e)*m+r]
							want := dot64(wr, x64)
							tol := activationErrorBound(typ, wr, xrow) + 4e-3*absDot(wr, x64) + 1e-30
							got := dst[s*m+r]
							if math.Abs(float64(got)-want) > tol {
								t.Fatalf("%s rows %d perSlot %v: slot %d (expert %d) row %d: got %g, want %g (tol %.3g)", typ, rows, perSlot, s, e, r, got, want, tol)
							}
							if one != nil && got != one[r] {
								t.Fatalf("%s: slot %d row %d: %g, MatMul of the expert %g", typ, s, r, got, one[r])
							}
						}
					}
				}
			}
		}
	}
}

// Expert ids outside the stack, a stack that is not whole experts and short
// buffers are errors, not panics.
func TestMatMulIDRejectsBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	typ := ggmltest.WeightTypes[0]
	cols := colsFor(typ)[1]
	w := Matrix{Type: typ, Rows: 8, Cols: cols, Data: ggmltest.RandomWeights(rng, typ, 8, cols, 0.5)}
	x := randomVector(rng, 2*cols, 1)
	dst := make([]float32, 2*2*4)
	for name, f := range map[string]func() error{
		"id past the experts": func() error { return MatMulID(nil, dst, w, 2, x, []int32{0, 2, 1, 0}, 2, 2, false) },
		"negative id":         func() error { return MatMulID(nil, dst, w, 2, x, []int32{0, -1}, 1, 2, false) },
		"not whole experts":   func() error { return MatMulID(nil, dst, w, 3, x, []int32{0, 1}, 1, 2, false) },
		"too few ids":         func() error { return MatMulID(nil, dst, w, 2, x, []int32{0}, 1, 2, false) },
		"short output":        func() error { return MatMulID(nil, dst[:3], w, 2, x, []int32{0, 1}, 1, 2, false) },
		"short input":         func() error { return MatMulID(nil, dst, w, 2, x[:cols], []int32{0, 1, 1, 0}, 2, 2, true) },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkMatMulID runs one thread on a Qwen3-MoE-shaped expert stack
// (64 experts of 768×2048 Q4_0, 8 chosen per token): decode (one token) and
// a 512-token batch, the batch by the one-pass tiles and by the per-expert
// matmuls; best-GMAC/s is of the fastest call (robust on a shared machine),
// to set beside BenchmarkMatMul's dense rates.
func BenchmarkMatMulID(b *testing.B) {
	const experts, m, cols, k = 64, 768, 2048, 8
	rng := rand.New(rand.NewPCG(5, 6))
	pool := parallel.NewPool(1)
	defer pool.Close()
	w := Matrix{Type: ggml.Q4_0, Rows: experts * m, Cols: cols, Data: ggmltest.RandomWeights(rng, ggml.Q4_0, experts*m, cols, 0.1)}
	rb := ggml.Q4_0.RowBytes(cols)
	for _, rows := range []int{1, 512} {
		ids := chooseExperts(rng, rows, k, experts+1, false)
		x := randomVector(rng, rows*cols, 1)
		dst := make([]float32, rows*k*m)
		run := map[string]func() error{
			"auto": func() error { return MatMulID(pool, dst, w, experts, x, ids, rows, k, false) },
		}
		if rows > 1 {
			run["per-expert"] = func() error { return matMatID(pool, dst, w, rb, m, experts, x, ids, k, false, &kernelsActive) }
		}
		for name, f := range run {
			b.Run(fmt.Sprintf("rows=%d/%s", rows, name), func(b *testing.B) {
				best := time.Hour
				for b.Loop() {
					t0 := time.Now()
					if err := f(); err != nil {
						b.Fatal(err)
					}
					best = min(best, time.Since(t0))
				}
				b.ReportMetric(float64(rows*k*m*cols)/best.Seconds()/1e9, "best-GMAC/s")
			})
		}
	}
}

// Only the chosen experts' rows are read: the experts no slot chooses are
// NaN, and no result is, in decode, the batch's tiles and the per-expert
// path.
func TestMatMulIDReadsOnlyChosenExperts(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	pool := parallel.NewPool(2)
	defer pool.Close()
	const experts, m, cols, k = 6, 8, 64, 2
	w := Matrix{Type: ggml.F32, Rows: experts * m, Cols: cols, Data: make([]byte, 4*experts*m*cols)}
	chosen := map[int32]bool{1: true, 4: true, 5: true}
	for r := 0; r < experts*m; r++ {
		for j := 0; j < cols; j++ {
			v := float32(rng.NormFloat64())
			if !chosen[int32(r/m)] {
				v = float32(math.NaN())
			}
			binary.LittleEndian.PutUint32(w.Data[4*(r*cols+j):], math.Float32bits(v))
		}
	}
	for _, rows := range []int{1, 20} {
		ids := make([]int32, rows*k)
		for s := range ids {
			ids[s] = []int32{1, 4, 5}[(s+s/k)%3]
		}
		x := randomVector(rng, rows*cols, 1)
		for name, run := range map[string]func(dst []float32) error{
			"auto": func(dst []float32) error { return MatMulID(pool, dst, w, experts, x, ids, rows, k, false) },
			"per-expert": func(dst []float32) error {
				return matMatID(pool, dst, w, 4*cols, m, experts, x, ids, k, false, &kernelsActive)
			},
		} {
			dst := make([]float32, rows*k*m)
			if err := run(dst); err != nil {
				t.Fatal(err)
			}
			for i, v := range dst {
				if v != v {
					t.Fatalf("rows %d %s: result %d is NaN: an unchosen expert was read", rows, name, i)
				}
			}
		}
	}
}
