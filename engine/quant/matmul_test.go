package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/half"
	"nibble/engine/parallel"
)

// colsFor gives the row lengths a type is tested at: odd block counts,
// lengths that are not a multiple of 8, and a model-sized one.
func colsFor(t ggml.Type) []int {
	switch t.BlockSize() {
	case 1:
		return []int{1, 7, 100, 256, 2048}
	case 32:
		return []int{32, 96, 256, 352, 384, 448, 2048}
	default:
		return []int{256, 768, 2048}
	}
}

type testCase struct {
	typ        ggml.Type
	rows, cols int
	n          int
	w          Matrix
	x          []float32
}

func testCases(rng *rand.Rand, typ ggml.Type) []testCase {
	var cs []testCase
	for _, cols := range colsFor(typ) {
		for _, n := range []int{1, 3, 4, 9} {
			rows := 37
			if cols >= 2048 {
				rows = 9
			}
			w := Matrix{Type: typ, Rows: rows, Cols: cols, Data: ggmltest.RandomWeights(rng, typ, rows, cols, 0.5)}
			x := randomVector(rng, n*cols, 1)
			if n == 3 { // a large, a tiny and an all-zero row
				for j := 0; j < cols; j++ {
					x[j] *= 100 // more overflows Q8_1's fp16 s, in ggml too
					x[cols+j] *= 1e-6
					x[2*cols+j] = 0
				}
			}
			cs = append(cs, testCase{typ, rows, cols, n, w, x})
		}
	}
	return cs
}

func (c *testCase) name() string {
	return fmt.Sprintf("%s %dx%d n=%d", c.typ, c.rows, c.cols, c.n)
}

func run(t *testing.T, c *testCase, tbl *kernelTable, pool *parallel.Pool) []float32 {
	t.Helper()
	dst := make([]float32, c.n*c.rows)
	if err := matMul(pool, dst, c.w, c.x, c.n, tbl); err != nil {
		t.Fatalf("%s: %v", c.name(), err)
	}
	return dst
}

// deqRows dequantizes the weights in float64 with the test reference.
func deqRows(c *testCase) [][]float64 {
	rb := c.typ.RowBytes(c.cols)
	out := make([][]float64, c.rows)
	for r := range out {
		out[r] = refDequant(c.typ, c.w.Data[r*rb:(r+1)*rb], c.cols)
	}
	return out
}

// absDot is Σ|w·x|, the scale of a dot product's rounding error.
func absDot(w []float64, x []float64) float64 {
	var s float64
	for j := range w {
		s += math.Abs(w[j] * x[j])
	}
	return s
}

func TestMatMulSIMDMatchesPortable(t *testing.T) {
	if simdName == "" {
		t.Skip("no SIMD kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, typ := range testWeightTypes {
		for _, c := range testCases(rng, typ) {
			simd, port := run(t, &c, &kernelsActive, pool), run(t, &c, &kernelsPortable, pool)
			w := deqRows(&c)
			for i := 0; i < c.n; i++ {
				xrow := c.x[i*c.cols : (i+1)*c.cols]
				x := emulateActivations(c.typ, xrow)
				for r := 0; r < c.rows; r++ {
					a, b := simd[i*c.rows+r], port[i*c.rows+r]
					_, corrAbs := q8_1Correction(&c, r, xrow)
					if tol := 2e-6*(absDot(w[r], x)+corrAbs) + 1e-30; math.Abs(float64(a-b)) > tol || a != a {
						t.Fatalf("%s: row %d x %d: simd %g, portable %g (tol %.3g)", c.name(), r, i, a, b, tol)
					}
				}
			}
		}
	}
}

// The portable kernels against a float64 dot of the reference-dequantized
// weights with the test's own transcription of ggml's activation
// quantization: only float32 rounding may separate them.
func TestMatMulMatchesEmulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, typ := range testWeightTypes {
		for _, c := range testCases(rng, typ) {
			got := run(t, &c, &kernelsPortable, pool)
			w := deqRows(&c)
			for i := 0; i < c.n; i++ {
				xrow := c.x[i*c.cols : (i+1)*c.cols]
				x := emulateActivations(c.typ, xrow)
				for r := 0; r < c.rows; r++ {
					corr, corrAbs := q8_1Correction(&c, r, xrow)
					want := dot64(w[r], x) + corr
					tol := 2e-6*(absDot(w[r], x)+corrAbs) + 1e-30
					if g := float64(got[i*c.rows+r]); math.Abs(g-want) > tol {
						t.Fatalf("%s: row %d x %d: got %g, want %g (tol %.3g)", c.name(), r, i, g, want, tol)
					}
				}
			}
		}
	}
}

// Against exact float64 activations the error is the activation rounding:
// half a quantization step per element at most.
func TestMatMulCloseToFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, typ := range testWeightTypes {
		for _, c := range testCases(rng, typ) {
			got := run(t, &c, &kernelsActive, pool)
			w := deqRows(&c)
			for i := 0; i < c.n; i++ {
				xrow := c.x[i*c.cols : (i+1)*c.cols]
				x := make([]float64, c.cols)
				for j, v := range xrow {
					x[j] = float64(v)
				}
				for r := 0; r < c.rows; r++ {
					want := dot64(w[r], x)
					tol := activationErrorBound(typ, w[r], xrow) + 4e-3*absDot(w[r], x) + 1e-30
					if g := float64(got[i*c.rows+r]); math.Abs(g-want) > tol {
						t.Fatalf("%s: row %d x %d: got %g, want %g (tol %.3g)", c.name(), r, i, g, want, tol)
					}
				}
			}
		}
	}
}

func dot64(w, x []float64) float64 {
	var s float64
	for j := range w {
		s += w[j] * x[j]
	}
	return s
}

// activationErrorBound is Σ|w_j|·(max rounding error of x_j): half a step
// of the 8-bit grid plus 127 times the fp16 rounding of its scale, or
// fp16/bf16 rounding.
func activationErrorBound(t ggml.Type, w []float64, x []float32) float64 {
	kind := kernelsPortable[t].act
	var bound float64
	switch kind {
	case actF32:
		return 0
	case actF16, actBF16:
		rel := 1.0 / 2048
		if kind == actBF16 {
			rel = 1.0 / 256
		}
		for j := range w {
			bound += math.Abs(w[j]) * math.Abs(float64(x[j])) * rel
			if kind == actF16 {
				bound += math.Abs(w[j]) * 0x1p-25 // subnormal halves
			}
		}
		return bound
	}
	bs := 32
	if kind == actQ8_K {
		bs = 256
	}
	for b := 0; b < len(x); b += bs {
		var amax, wsum float64
		for j := b; j < b+bs; j++ {
			amax = math.Max(amax, math.Abs(float64(x[j])))
			wsum += math.Abs(w[j])
		}
		d := amax / 127
		d16 := d // Q8_K keeps an f32 scale
		if kind != actQ8_K {
			d16 = float64(half.ToFloat32(half.FromFloat32(float32(d))))
		}
		bound += wsum * (0.5001*d + 127*math.Abs(d-d16))
	}
	return bound
}

// emulateActivations is ggml's activation quantization for weight type t
// (AVX2 quantize_row_q8_0 / q8_1, quantize_row_q8_K_ref, fp16/bf16
// rounding), dequantized to float64.
func emulateActivations(t ggml.Type, x []float32) []float64 {
	out := make([]float64, len(x))
	switch kernelsPortable[t].act {
	case actF32:
		for j, v := range x {
			out[j] = float64(v)
		}
	case actF16:
		for j, v := range x {
			out[j] = float64(half.ToFloat32(half.FromFloat32(v)))
		}
	case actBF16:
		for j, v := range x {
			b := math.Float32bits(v)
			out[j] = float64(math.Float32frombits((b + 0x7fff + (b >> 16 & 1)) &^ 0xffff))
		}
	case actQ8_0, actQ8_1:
		for b := 0; b < len(x); b += 32 {
			var mx float32
			for _, v := range x[b : b+32] {
				mx = float32(math.Max(float64(mx), math.Abs(float64(v))))
			}
			d := half.ToFloat32(half.FromFloat32(mx / 127))
			id := float32(0)
			if mx != 0 {
				id = 127 / mx
			}
			for j := b; j < b+32; j++ {
				out[j] = math.RoundToEven(float64(x[j]*id)) * float64(d)
			}
		}
	case actQ8_K:
		for b := 0; b < len(x); b += 256 {
			var amax, mx float32
			for _, v := range x[b : b+256] {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, mx = a, v
				}
			}
			if amax == 0 {
				continue
			}
			iscale := -127 / mx
			d := 1 / iscale
			for j := b; j < b+256; j++ {
				out[j] = math.Min(127, math.RoundToEven(float64(iscale*x[j]))) * float64(d)
			}
		}
	}
	return out
}

// q8_1Correction: for Q4_1/Q5_1 ggml adds m·s with s = fp16(d·Σq) (d before
// its fp16 rounding) instead of Σ m·q·fp16(d); return that difference and
// Σ|m·s|.
func q8_1Correction(c *testCase, r int, x []float32) (corr, abs float64) {
	if c.typ != ggml.Q4_1 && c.typ != ggml.Q5_1 {
		return 0, 0
	}
	rb, ts := c.typ.RowBytes(c.cols), c.typ.TypeSize()
	for b := 0; b < c.cols/32; b++ {
		m := float64(half.ToFloat32(binary.LittleEndian.Uint16(c.w.Data[r*rb+b*ts+2:])))
		var mx float32
		for _, v := range x[b*32 : b*32+32] {
			mx = float32(math.Max(float64(mx), math.Abs(float64(v))))
		}
		d := mx / 127
		id := float32(0)
		if mx != 0 {
			id = 127 / mx
		}
		var sum float64
		for _, v := range x[b*32 : b*32+32] {
			sum += math.RoundToEven(float64(v * id))
		}
		s := float64(half.ToFloat32(half.FromFloat32(d * float32(sum))))
		corr += m * (s - sum*float64(half.ToFloat32(half.FromFloat32(d))))
		abs += math.Abs(m * s)
	}
	return corr, abs
}

func TestActivationQuantizationRounding(t *testing.T) {
	// amax 127 gives id = 1: halves round to even, as VROUNDPS does.
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 127, 2.5, -3.5, 0.5
	qs, d, s, sum := make([]int8, 32), make([]float32, 1), make([]float32, 1), make([]int32, 1)
	quantizeQ8Act(qs, d, s, sum, x)
	if qs[0] != 127 || qs[1] != 2 || qs[2] != -4 || qs[3] != 0 || d[0] != 1 || sum[0] != 125 || s[0] != 125 {
		t.Fatalf("q8_0: qs %v d %g s %g sum %d", qs[:4], d[0], s[0], sum[0])
	}
	// Q8_K: the signed max maps to -127; ties to even; d carries the sign.
	xk := make([]float32, 256)
	xk[0], xk[1], xk[17] = 2, -1, 0.5
	qk, dk, bs := make([]int8, 256), make([]float32, 1), make([]int16, 16)
	quantizeQ8K(qk, dk, bs, xk)
	if qk[0] != -127 || qk[1] != 64 || qk[17] != -32 || dk[0] != -1/float32(63.5) || bs[0] != -63 || bs[1] != -32 {
		t.Fatalf("q8_K: qs %d %d %d d %g bsums %v", qk[0], qk[1], qk[17], dk[0], bs[:2])
	}
	clear(xk)
	bs[3] = 99
	quantizeQ8K(qk, dk, bs, xk)
	if dk[0] != 0 || bs[3] != 0 {
		t.Fatalf("zero row: d %g bsums %v", dk[0], bs)
	}
}

func TestMatMulRejectsBadSizes(t *testing.T) {
	w := Matrix{Type: ggml.Q4_0, Rows: 4, Cols: 64, Data: make([]byte, 4*36)}
	x, dst := make([]float32, 2*64), make([]float32, 2*4)
	cases := []struct {
		name string
		w    Matrix
		x    []float32
		dst  []float32
		n    int
		want string
	}{
		{"unsupported", Matrix{Type: ggml.IQ2_XS, Rows: 1, Cols: 256, Data: make([]byte, 74)}, x, dst, 1, "unsupported"},
		{"data size", Matrix{Type: ggml.Q4_0, Rows: 4, Cols: 64, Data: make([]byte, 4*36-1)}, x, dst, 1, "data has"},
		{"partial block", Matrix{Type: ggml.Q4_0, Rows: 1, Cols: 40, Data: make([]byte, 18)}, x, dst, 1, "block size"},
		{"zero rows", Matrix{Type: ggml.F32, Rows: 0, Cols: 4}, x, dst, 1, "shape"},
		{"short x", w, x[:100], dst, 2, "inputs"},
		{"short dst", w, x, dst[:7], 2, "outputs"},
		{"negative n", w, x, dst, -1, "rows"},
	}
	for _, c := range cases {
		err := MatMul(nil, c.dst, c.w, c.x, c.n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if err := MatMul(nil, nil, w, nil, 0); err != nil {
		t.Errorf("n = 0: %v", err)
	}
}

// Steady-state decoding must not allocate per call beyond the pool's own
// bookkeeping (a parallel job and its closure): the activation scratch is
// reused.
func TestMatMulAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	rng := rand.New(rand.NewPCG(1, 1))
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q4_K, ggml.F16, ggml.F32} {
		w := Matrix{Type: typ, Rows: 256, Cols: 512, Data: ggmltest.RandomWeights(rng, typ, 256, 512, 1)}
		x, dst := randomVector(rng, 4*512, 1), make([]float32, 4*256)
		for _, n := range []int{1, 4} {
			allocs := testing.AllocsPerRun(20, func() {
				if err := MatMul(pool, dst, w, x, n); err != nil {
					t.Fatal(err)
				}
			})
			limit := 4.0 // the pool jobs and closures of prepare and matMat
			if n == 1 {
				limit = 2 // matVec's only
			}
			if allocs > limit {
				t.Errorf("%s n=%d: %.1f allocations per MatMul", typ, n, allocs)
			}
		}
	}
}

func TestSupportedMatchesDequantizers(t *testing.T) {
	for typ := ggml.Type(0); typ < 64; typ++ {
		_, deq := dequantizers[typ]
		if Supported(typ) != deq {
			t.Errorf("%s: Supported %v, dequantizer %v", typ, Supported(typ), deq)
		}
		if Supported(typ) && (kernelsActive[typ].dot1 == nil || kernelsActive[typ].act != kernelsPortable[typ].act) {
			t.Errorf("%s: active kernel inconsistent with the portable one", typ)
		}
	}
}

// The converters in use (SIMD where available) must equal the Go ones bit
// for bit: the portable and SIMD matmuls share them.
func TestActivationConvertersMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var inputs [][]float32
	for k := 0; k < 20; k++ {
		x := randomVector(rng, 1024, math.Pow(10, float64(rng.IntN(7)-3)))
		switch k % 5 {
		case 1: // ties: x·127/amax lands on .5
			for j := range x {
				x[j] = float32(rng.IntN(255)-127) + 0.5
			}
			x[0], x[256] = 127, -127
		case 2: // zero blocks and a zero 256-block
			clear(x[:256])
			clear(x[300:332])
		case 3: // the largest magnitude with both signs: the first one wins
			x[10], x[20] = -50, 50
			x[300], x[301] = 50, -50
		case 4: // subnormals and huge values
			x[0], x[1], x[2] = 1e-40, -3e38, 2e38
		}
		inputs = append(inputs, x)
	}
	for k, x := range inputs {
		n := len(x)
		qa, qb := make([]int8, n), make([]int8, n)
		da, db, sa, sb := make([]float32, n/32), make([]float32, n/32), make([]float32, n/32), make([]float32, n/32)
		ua, ub := make([]int32, n/32), make([]int32, n/32)
		quantizeQ8Row(qa, da, sa, ua, x)
		quantizeQ8Act(qb, db, sb, ub, x)
		for j := range qa {
			if qa[j] != qb[j] || da[j/32] != db[j/32] || math.Float32bits(sa[j/32]) != math.Float32bits(sb[j/32]) || ua[j/32] != ub[j/32] {
				t.Fatalf("input %d q8_0 element %d: q %d/%d d %g/%g s %g/%g sum %d/%d", k, j, qa[j], qb[j], da[j/32], db[j/32], sa[j/32], sb[j/32], ua[j/32], ub[j/32])
			}
		}
		kd, kdb := make([]float32, n/256), make([]float32, n/256)
		bs, bsb := make([]int16, n/16), make([]int16, n/16)
		quantizeQ8KRow(qa, kd, bs, x)
		quantizeQ8K(qb, kdb, bsb, x)
		for j := range qa {
			if qa[j] != qb[j] || kd[j/256] != kdb[j/256] || bs[j/16] != bsb[j/16] {
				t.Fatalf("input %d q8_K element %d: q %d/%d d %g/%g bsum %d/%d", k, j, qa[j], qb[j], kd[j/256], kdb[j/256], bs[j/16], bsb[j/16])
			}
		}
		fa, fb := make([]float32, n-3), make([]float32, n-3) // a length that is not a multiple of 8
		roundF16(fa, x[:n-3])
		roundF16Go(fb, x[:n-3])
		for j := range fa {
			if math.Float32bits(fa[j]) != math.Float32bits(fb[j]) {
				t.Fatalf("input %d f16 element %d: %g vs %g", k, j, fa[j], fb[j])
			}
		}
	}
}
