//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/metal/device"
)

// nearestEven is ggml's nearest_int (round half to even), as engine/quant.
func nearestEven(f float32) float32 { return float32(math.RoundToEven(float64(f))) }

// actRoundTwin is engine/quant's activation conversion (activation.go:
// quantizeQ8Act, quantizeQ8K, roundF16, the bf16 rounding), expanded back to
// float32 as q·d.
func actRoundTwin(form string, x []float32) []float32 {
	y := make([]float32, len(x))
	switch form {
	case "f16":
		for i, v := range x {
			y[i] = half.Round(v)
		}
	case "bf16":
		for i, v := range x {
			y[i] = half.BF16ToFloat32(half.BF16FromFloat32(v))
		}
	case "q8_0":
		for b := 0; b < len(x)/32; b++ {
			xb := x[32*b : 32*b+32]
			var amax float32
			for _, v := range xb {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			var id float32
			if amax != 0 {
				id = 127 / amax
			}
			d := half.Round(amax / 127)
			for j, v := range xb {
				y[32*b+j] = d * min(127, max(-128, nearestEven(v*id)))
			}
		}
	case "q8_k":
		for b := 0; b < len(x)/256; b++ {
			xb := x[256*b : 256*b+256]
			var amax, mx float32
			for _, v := range xb {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, mx = a, v
				}
			}
			if amax == 0 {
				continue
			}
			iscale := -127 / mx
			d := 1 / iscale
			for j, v := range xb {
				y[256*b+j] = d * min(127, max(-128, nearestEven(iscale*v)))
			}
		}
	}
	return y
}

// kernel_act_round_{f16,bf16,q8_0,q8_k} against engine/quant's conversions.
// Tolerance: none (the same float32 operations; the emulator rounds them as
// Go does).
func TestActRound(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, form := range []string{"f16", "bf16", "q8_0", "q8_k"} {
		p := pipeline(t, l, "kernel_act_round_"+form)
		cols := []int{256, 4096, 5120}
		if form != "q8_k" {
			cols = append(cols, 2080, 64)
		}
		for _, n := range cols {
			for _, rows := range []int{1, 5} {
				x := make([]float32, rows*n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Exp(2*r.NormFloat64()))
				}
				// A block of zeros, and a block whose largest magnitudes
				// tie with opposite signs (the first one sets the sign of
				// the CPU's Q8_K scale, which cancels in y).
				clear(x[:min(n, 256)])
				if n >= 512 {
					x[256+7], x[256+200] = -40, 40
				}
				want := actRoundTwin(form, x)
				for _, o := range orders {
					t.Run(fmt.Sprintf("%s_n%d_rows%d_%v", form, n, rows, o), func(t *testing.T) {
						dst := buffer(t, d, make([]byte, 4*len(x)))
						var groups, threads int
						switch form {
						case "f16", "bf16":
							threads = min(256, (n/4+31)&^31)
							groups = (n/4 + threads - 1) / threads
						case "q8_0":
							sgs := min(8, n/32)
							threads, groups = 32*sgs, (n/32+sgs-1)/sgs
						case "q8_k":
							sgs := min(4, n/256)
							threads, groups = 32*sgs, (n/256+sgs-1)/sgs
						}
						run(t, d, o, device.Dispatch{
							Pipeline: p, Groups: [3]int{groups, rows, 1}, Threads: [3]int{threads, 1, 1},
							Inline:  []device.Inline{{Index: 0, Data: args(n, 4*n, 4*n)}},
							Buffers: []device.Binding{{Index: 1, Buffer: buffer(t, d, f32Bytes(x))}, {Index: 2, Buffer: dst}},
						})
						for i, v := range f32s(dst.Bytes()) {
							if math.Float32bits(v) != math.Float32bits(want[i]) {
								t.Fatalf("row %d element %d (x %v): %v, want %v", i/n, i%n, x[i], v, want[i])
							}
						}
					})
				}
			}
		}
	}
}
