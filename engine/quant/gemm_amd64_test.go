//go:build amd64 && unix

package quant

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"nibble/engine/parallel"
	"syscall"
	"testing"
	"time"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
)

// gemmVariants are the Q4_0 GEMMs this machine runs, by name.
func gemmVariants() map[string]*gemmKernel {
	v := map[string]*gemmKernel{}
	if hasGemmAVX512() {
		v["avx512vnni"] = &gemmQ4_0AVX512
	}
	if enableAMX() {
		v["amx"] = &gemmQ4_0AMX
	}
	return v
}

// Every GEMM this machine has, not only the one in use, gives the bits of
// the arithmetic written out (so the AMX and AVX-512 kernels agree).
func TestGemmQ4_0VariantsBitExact(t *testing.T) {
	variants := gemmVariants()
	if len(variants) == 0 {
		t.Skip("no Q4_0 GEMM on this machine")
	}
	for name, g := range variants {
		t.Run(name, func(t *testing.T) {
			tbl := kernelsActive
			tbl[ggml.Q4_0].gemm = g
			checkGemmQ4_0BitExact(t, &tbl)
		})
	}
}

func TestPackQ4_0GroupAsmMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, cols := range []int{32, 352} {
		rb, nb := ggml.Q4_0.RowBytes(cols), cols/32
		w := ggmltest.RandomWeights(rng, ggml.Q4_0, gemmRows, cols, 1)
		want, got := make([]byte, q4_0GroupBytes(nb)), make([]byte, q4_0GroupBytes(nb))
		packQ4_0GroupGo(want, w, rb, nb)
		packQ4_0GroupSimd(got, w, rb, nb)
		if !bytes.Equal(got, want) {
			t.Fatalf("cols %d: AVX-512 packed groups differ", cols)
		}
		want, got = make([]byte, q4_0AMXGroupBytes(nb)), make([]byte, q4_0AMXGroupBytes(nb))
		packQ4_0GroupAMXGo(want, w, rb, nb)
		packQ4_0GroupAMX(got, w, rb, nb)
		if !bytes.Equal(got, want) {
			t.Fatalf("cols %d: AMX packed groups differ", cols)
		}
	}
}

// packQ4_0GroupAMXGo lays 16 Q4_0 rows out for the AMX kernel: per block,
// 8 rows of 64 bytes, row k holding elements 4k..4k+3 (k < 4: low nibbles of
// bytes 4k..; else high nibbles of bytes 4(k-4)..) of the 16 weight rows, 4
// bytes per row, unpacked to u-8 (as int8); then the 16 fp16 scales.
func packQ4_0GroupAMXGo(dst, w []byte, rb, nb int) {
	for b := 0; b < nb; b++ {
		o := dst[b*q4_0AMXBlockBytes : (b+1)*q4_0AMXBlockBytes]
		for r := 0; r < gemmRows; r++ {
			src := w[r*rb+b*18 : r*rb+b*18+18]
			o[512+2*r], o[513+2*r] = src[0], src[1]
			for k := 0; k < 4; k++ {
				for i := 0; i < 4; i++ {
					q := src[2+4*k+i]
					o[k*64+r*4+i] = q&0x0F - 8
					o[(k+4)*64+r*4+i] = q>>4 - 8
				}
			}
		}
	}
}

// BenchmarkGemmQ4_0Variants: each GEMM of this machine on one thread, on a
// 512-row prompt batch (the pp512 shape), in GMAC/s of the fastest call.
func BenchmarkGemmQ4_0Variants(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := parallel.NewPool(1)
	defer pool.Close()
	const n = 512
	for _, sh := range benchShapes {
		w := Matrix{Type: ggml.Q4_0, Rows: sh[0], Cols: sh[1], Data: ggmltest.RandomWeights(rng, ggml.Q4_0, sh[0], sh[1], 0.1)}
		x, dst := randomVector(rng, n*sh[1], 1), make([]float32, n*sh[0])
		for name, g := range gemmVariants() {
			tbl := kernelsActive
			tbl[ggml.Q4_0].gemm = g
			b.Run(fmt.Sprintf("%dx%d/%s", sh[0], sh[1], name), func(b *testing.B) {
				best, bestCPU := time.Hour, time.Hour
				for b.Loop() {
					t0, c0 := time.Now(), processCPUTime()
					if err := matMul(pool, dst, w, x, n, &tbl); err != nil {
						b.Fatal(err)
					}
					best, bestCPU = min(best, time.Since(t0)), min(bestCPU, processCPUTime()-c0)
				}
				macs := float64(n * sh[0] * sh[1])
				b.ReportMetric(macs/best.Seconds()/1e9, "best-GMAC/s")
				// CPU time is what a loaded machine's time slicing leaves out.
				b.ReportMetric(macs/bestCPU.Seconds()/1e9, "cpu-GMAC/s")
			})
		}
	}
}

// processCPUTime is the user+system CPU time of the process so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
