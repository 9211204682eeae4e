//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/cpu"
	"nibble/metal/emulator"
)

// RMSNorm on the emulator against the CPU backend's. Tolerance: 2e-6 of
// the row's largest output (the kernel sums squares in float32, in simd
// order; the CPU in float64).
func TestEncoderRMSNorm(t *testing.T) {
	dev, e := opsEmu(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(73, 74))
	for _, c := range []struct{ n, rows int }{{896, 3}, {2048, 1}, {4096, 2}, {64, 5}, {8192, 1}} {
		x := opsRandom(r, c.n*c.rows, 2)
		w := make([]float32, c.n)
		for i := range w {
			w[i] = float32(1 + 0.3*r.NormFloat64())
		}
		const eps = 1e-6
		cw, gw := opsVector(t, dev, cb, w, 32)
		want := opsCPU(cb, make([]float32, len(x)))
		cb.RMSNorm(want, opsCPU(cb, x), cw, eps, c.rows)
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("n%d_rows%d_%v", c.n, c.rows, o), func(t *testing.T) {
				dst := opsFloats(t, dev, make([]float32, len(x)), 16)
				e.RMSNorm(dst, opsFloats(t, dev, x, 0), gw, eps, c.rows)
				opsRun(t, dev, e, o)
				got := opsRead(dst)
				for row := 0; row < c.rows; row++ {
					exp := want.D[row*c.n : (row+1)*c.n]
					var scale float64
					for _, v := range exp {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i, v := range got[row*c.n : (row+1)*c.n] {
						if d := math.Abs(float64(v - exp[i])); !(d <= 2e-6*scale) {
							t.Fatalf("row %d element %d: %v, want %v", row, i, v, exp[i])
						}
					}
				}
			})
		}
	}
}
