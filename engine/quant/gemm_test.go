package quant

import (
	"encoding/binary"
	"math/big"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/half"
	"nibble/engine/parallel"
)

// fma32 is a float32 fused multiply-add, rounded once (big.Float: the
// float64 math.FMA would round twice).
func fma32(x, y, acc float32) float32 {
	p := new(big.Float).SetPrec(64).SetFloat64(float64(x))
	p.Mul(p, new(big.Float).SetFloat64(float64(y))) // exact: 48 bits
	s := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven)
	s.Add(p, new(big.Float).SetFloat64(float64(acc)))
	f, _ := s.Float32()
	return f
}

// gemmQ4_0Want is the GEMM's arithmetic written out: per block the exact
// integer Σ(u-8)·q, then acc = fma(float(isum), dw·dy, acc) block by block.
func gemmQ4_0Want(w []byte, rb int, qs []int8, d []float32) float32 {
	var acc float32
	for b := range d {
		blk := w[b*18 : b*18+18]
		var isum int32
		for e := 0; e < 16; e++ {
			isum += (int32(blk[2+e]&0x0F) - 8) * int32(qs[b*32+e])
			isum += (int32(blk[2+e]>>4) - 8) * int32(qs[b*32+16+e])
		}
		dw := half.ToFloat32(uint16(blk[0]) | uint16(blk[1])<<8)
		acc = fma32(float32(isum), dw*d[b], acc)
	}
	return acc
}

// The GEMM against its arithmetic written out, bit for bit: whole groups of
// 16 weight rows and a tail the dot kernels do, full activation tiles and a
// padded one (run after a larger n, so the padding must have been cleared).
func TestGemmQ4_0BitExact(t *testing.T) {
	if kernelsActive[ggml.Q4_0].gemm == nil {
		t.Skip("no Q4_0 GEMM on this machine")
	}
	checkGemmQ4_0BitExact(t, &kernelsActive)
}

func checkGemmQ4_0BitExact(t *testing.T, tbl *kernelTable) {
	t.Helper()
	rng := rand.New(rand.NewPCG(41, 42))
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, cols := range []int{32, 96, 2048} {
		for _, rows := range []int{16, 53} {
			w := Matrix{Type: ggml.Q4_0, Rows: rows, Cols: cols, Data: ggmltest.RandomWeights(rng, ggml.Q4_0, rows, cols, 0.5)}
			rb := ggml.Q4_0.RowBytes(cols)
			for _, n := range []int{40, 21, 16} {
				x := randomVector(rng, n*cols, 1)
				for j := range cols { // a large and an all-zero row
					x[j] *= 100
					x[cols+j] = 0
				}
				got := make([]float32, n*rows)
				if err := matMul(pool, got, w, x, n, tbl); err != nil {
					t.Fatal(err)
				}
				nb := cols / 32
				qs, d, s, sum := make([]int8, cols), make([]float32, nb), make([]float32, nb), make([]int32, nb)
				for i := 0; i < n; i++ {
					quantizeQ8Row(qs, d, s, sum, x[i*cols:(i+1)*cols])
					for r := 0; r < rows/gemmRows*gemmRows; r++ {
						want := gemmQ4_0Want(w.Data[r*rb:(r+1)*rb], rb, qs, d)
						if g := got[i*rows+r]; g != want {
							t.Fatalf("Q4_0 %dx%d n=%d: row %d x %d: got %g, want %g", rows, cols, n, r, i, g, want)
						}
					}
				}
			}
		}
	}
}

// The rows the GEMM does and the tail rows agree with the portable kernels
// within float32 rounding (TestMatMulSIMDMatchesPortable's cases are too
// small for the GEMM).
func TestGemmQ4_0MatchesPortable(t *testing.T) {
	if kernelsActive[ggml.Q4_0].gemm == nil {
		t.Skip("no Q4_0 GEMM on this machine")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	pool := parallel.NewPool(2)
	defer pool.Close()
	c := testCase{typ: ggml.Q4_0, rows: 37, cols: 352, n: 18}
	c.w = Matrix{Type: c.typ, Rows: c.rows, Cols: c.cols, Data: ggmltest.RandomWeights(rng, c.typ, c.rows, c.cols, 0.5)}
	c.x = randomVector(rng, c.n*c.cols, 1)
	simd, port := run(t, &c, &kernelsActive, pool), run(t, &c, &kernelsPortable, pool)
	w := deqRows(&c)
	for i := 0; i < c.n; i++ {
		x := emulateActivations(c.typ, c.x[i*c.cols:(i+1)*c.cols])
		for r := 0; r < c.rows; r++ {
			a, b := simd[i*c.rows+r], port[i*c.rows+r]
			if tol := 2e-6*absDot(w[r], x) + 1e-30; abs32(a-b) > float32(tol) || a != a {
				t.Fatalf("%s: row %d x %d: simd %g, portable %g (tol %.3g)", c.name(), r, i, a, b, tol)
			}
		}
	}
}

// packQ4_0GroupGo lays 16 Q4_0 rows out by block: for block b, 4 vectors of
// 64 bytes, vector k holding bytes 4k..4k+3 of the 16 rows' nibbles (row r
// at 4r; low nibbles are elements 4k..4k+3, high ones 16+4k..16+4k+3), then
// the 16 rows' fp16 scales.
func packQ4_0GroupGo(dst, w []byte, rb, nb int) {
	_ = dst[q4_0GroupBytes(nb)-1]
	_ = w[gemmRows*rb-1]
	for b := 0; b < nb; b++ {
		o := dst[b*288 : b*288+288]
		for r := 0; r < gemmRows; r++ {
			src := w[r*rb+b*18 : r*rb+b*18+18]
			o[256+2*r], o[257+2*r] = src[0], src[1]
			for k := 0; k < 4; k++ {
				binary.LittleEndian.PutUint32(o[k*64+r*4:], binary.LittleEndian.Uint32(src[2+4*k:]))
			}
		}
	}
}
