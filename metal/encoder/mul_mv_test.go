//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/metal/internal/emulator"
)

// MatMulNorm against the unfused ops it replaces (RMSNorm then MatMul) on
// the emulator, in both orders: one dispatch on the mat-vec's rows (within
// 1e-5 of the largest output: the norm's scale multiplies the sums instead
// of each element), the unfused dispatches from mul_mm's rows on.
func TestMatMulFused(t *testing.T) {
	dev, e := emuEncoder(t)
	r := rand.New(rand.NewPCG(71, 72))
	for _, typ := range []ggml.Type{ggml.F16, ggml.Q4_0, ggml.Q4_K, ggml.Q6_K} {
		for _, rows := range []int{1, 3, 9} {
			const outs, cols = 37, 1024
			w := deviceWeight(t, dev, typ, outs, cols, ggmltest.RandomWeights(r, typ, outs, cols, 0.5))
			gw := make([]float32, cols)
			for i := range gw {
				gw[i] = float32(r.NormFloat64())
			}
			norm := deviceWeight(t, dev, ggml.F32, 1, cols, f32Bytes(gw))
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(3 * r.NormFloat64())
			}
			fusedDispatches := 1
			if rows >= mulMMMinRows {
				fusedDispatches = 2
			}
			for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
				t.Run(fmt.Sprintf("%v_rows%d_%v", typ, rows, o), func(t *testing.T) {
					xr := devFloats(t, dev, x, 16)
					h := devFloats(t, dev, make([]float32, rows*cols), 0)
					plain, fused := devFloats(t, dev, make([]float32, rows*outs), 0), devFloats(t, dev, make([]float32, rows*outs), 0)

					e.RMSNorm(h, xr, norm, 1e-5, rows)
					e.MatMul(plain, w, h, rows)
					runEncoded(t, dev, e, o)
					e.MatMulNorm(fused, w, xr, norm, 1e-5, rows)
					if n := e.List().Len(); n != fusedDispatches {
						t.Fatalf("MatMulNorm: %d dispatches, want %d", n, fusedDispatches)
					}
					runEncoded(t, dev, e, o)
					want, got := readFloats(plain), readFloats(fused)
					largest := 0.0
					for _, v := range want {
						largest = max(largest, math.Abs(float64(v)))
					}
					for i := range want {
						if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*largest) {
							t.Fatalf("MatMulNorm output %d: %v, unfused %v", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}
