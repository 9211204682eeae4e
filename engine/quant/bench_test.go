package quant

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/half"
	"nibble/engine/parallel"
)

// Benchmarks run single-threaded on Llama-3.2-1B projection shapes and
// report GMAC/s, averaged and of the fastest call; the portable
// sub-benchmark also reports simd/portable (of the fastest calls).
// BenchmarkDecode1B estimates decode tokens/s on 2 threads.

var benchShapes = [][2]int{{2048, 2048}, {8192, 2048}}

func benchMatMul(b *testing.B, t ggml.Type, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := parallel.NewPool(1)
	defer pool.Close()
	for _, sh := range benchShapes {
		w := Matrix{Type: t, Rows: sh[0], Cols: sh[1], Data: ggmltest.RandomWeights(rng, t, sh[0], sh[1], 0.1)}
		x := randomVector(rng, n*sh[1], 1)
		dst := make([]float32, n*sh[0])
		var simdRate float64
		type impl struct {
			name string
			tbl  *kernelTable
		}
		impls := []impl{{"simd", &kernelsActive}, {"portable", &kernelsPortable}}
		if kernelsActive[t].gemm != nil && n >= gemmMinActs {
			noGemm := kernelsActive // the dot kernels the GEMM replaced, for comparison
			noGemm[t].gemm = nil
			impls = slices.Insert(impls, 1, impl{"nogemm", &noGemm})
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%dx%d/%s", sh[0], sh[1], impl.name), func(b *testing.B) {
				best := time.Hour // the fastest call: robust on a shared machine
				for b.Loop() {
					t0 := time.Now()
					if err := matMul(pool, dst, w, x, n, impl.tbl); err != nil {
						b.Fatal(err)
					}
					best = min(best, time.Since(t0))
				}
				macs := float64(n * sh[0] * sh[1])
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				rate := macs / best.Seconds() / 1e9
				b.ReportMetric(rate, "best-GMAC/s")
				if impl.name == "simd" {
					simdRate = rate
				} else if impl.name == "portable" && simdRate > 0 {
					b.ReportMetric(simdRate/rate, "simd/portable")
				}
			})
		}
	}
}

func BenchmarkMatMulQ4_0(b *testing.B)  { benchMatMul(b, ggml.Q4_0, 1) }
func BenchmarkMatMulQ4_1(b *testing.B)  { benchMatMul(b, ggml.Q4_1, 1) }
func BenchmarkMatMulQ5_0(b *testing.B)  { benchMatMul(b, ggml.Q5_0, 1) }
func BenchmarkMatMulQ5_1(b *testing.B)  { benchMatMul(b, ggml.Q5_1, 1) }
func BenchmarkMatMulQ8_0(b *testing.B)  { benchMatMul(b, ggml.Q8_0, 1) }
func BenchmarkMatMulQ2_K(b *testing.B)  { benchMatMul(b, ggml.Q2_K, 1) }
func BenchmarkMatMulQ3_K(b *testing.B)  { benchMatMul(b, ggml.Q3_K, 1) }
func BenchmarkMatMulQ4_K(b *testing.B)  { benchMatMul(b, ggml.Q4_K, 1) }
func BenchmarkMatMulQ5_K(b *testing.B)  { benchMatMul(b, ggml.Q5_K, 1) }
func BenchmarkMatMulQ6_K(b *testing.B)  { benchMatMul(b, ggml.Q6_K, 1) }
func BenchmarkMatMulMXFP4(b *testing.B) { benchMatMul(b, ggml.MXFP4, 1) }
func BenchmarkMatMulF16(b *testing.B)   { benchMatMul(b, ggml.F16, 1) }
func BenchmarkMatMulBF16(b *testing.B)  { benchMatMul(b, ggml.BF16, 1) }
func BenchmarkMatMulF32(b *testing.B)   { benchMatMul(b, ggml.F32, 1) }

// Prefill: 64 activation rows per call.
func BenchmarkPrefillQ4_0(b *testing.B)  { benchMatMul(b, ggml.Q4_0, 64) }
func BenchmarkPrefillQ8_0(b *testing.B)  { benchMatMul(b, ggml.Q8_0, 64) }
func BenchmarkPrefillF16(b *testing.B)   { benchMatMul(b, ggml.F16, 64) }
func BenchmarkPrefillQ4_K(b *testing.B)  { benchMatMul(b, ggml.Q4_K, 64) }
func BenchmarkPrefillMXFP4(b *testing.B) { benchMatMul(b, ggml.MXFP4, 64) }

// fastQ4_0 fills a Q4_0 matrix quickly (the 1B benchmark needs 700 MB):
// random nibbles, scales around 0.01.
func fastQ4_0(rng *rand.Rand, rows, cols int) Matrix {
	data := make([]byte, rows*ggml.Q4_0.RowBytes(cols))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	scale := half.FromFloat32(0.01)
	for off := 0; off < len(data); off += 18 {
		binary.LittleEndian.PutUint16(data[off:], scale)
	}
	return Matrix{Type: ggml.Q4_0, Rows: rows, Cols: cols, Data: data}
}

// BenchmarkDecode1B runs the matmuls of one decode step of a
// Llama-3.2-1B-shaped Q4_0 model (16 layers, 2048 embd, 8192 ff, 8 kv heads
// of 64, tied 128256-row output) on 2 threads, weights in DRAM as in a real
// model. Attention and the small ops are not included.
func BenchmarkDecode1B(b *testing.B) {
	if testing.Short() {
		b.Skip("allocates 700 MB")
	}
	const layers, embd, ff, kvDim, vocab = 16, 2048, 8192, 512, 128256
	rng := rand.New(rand.NewPCG(5, 5))
	type layer struct{ q, k, v, o, gate, up, down Matrix }
	ls := make([]layer, layers)
	for i := range ls {
		ls[i] = layer{
			fastQ4_0(rng, embd, embd), fastQ4_0(rng, kvDim, embd), fastQ4_0(rng, kvDim, embd),
			fastQ4_0(rng, embd, embd), fastQ4_0(rng, ff, embd), fastQ4_0(rng, ff, embd), fastQ4_0(rng, embd, ff),
		}
	}
	out := fastQ4_0(rng, vocab, embd)
	pool := parallel.NewPool(2)
	defer pool.Close()
	var mats []Matrix
	for _, l := range ls {
		mats = append(mats, l.q, l.k, l.v, l.o, l.gate, l.up, l.down)
	}
	mats = append(mats, out)
	x, dst := randomVector(rng, ff, 1), make([]float32, vocab)
	// best[m] is matmul m's fastest time over the iterations: on a shared
	// machine their sum estimates the undisturbed token time.
	best := make([]time.Duration, len(mats))
	for i := range best {
		best[i] = time.Hour
	}
	for b.Loop() {
		for m, w := range mats {
			t0 := time.Now()
			if err := MatMul(pool, dst, w, x, 1); err != nil {
				b.Fatal(err)
			}
			best[m] = min(best[m], time.Since(t0))
		}
	}
	var sum time.Duration
	for _, d := range best {
		sum += d
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(1/sum.Seconds(), "best-tok/s")
}
