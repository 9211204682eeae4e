//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/metal/internal/emulator"
)

// RoPE on the emulator against the CPU backend's, norm and NeoX, with
// rope_freqs (LongRoPE) divisors, a position scale, partial rotation and
// LongRoPE's attention factor. Tolerance:
// 1e-6 of the row's largest |x| at any position (the kernel's angle is
// within ~3e-7 rad of the CPU's float64 one; metal/shaders has the shapes).
func TestEncoderRoPE(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(75, 76))
	for _, c := range []struct {
		heads, headDim, dims int
		base, scale          float32
		factors              bool
		pos                  []int32
		mscale               float32
	}{
		{14, 64, 64, 1e6, 1, false, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 4095}, 0},
		{32, 128, 128, 500000, 1, true, []int32{131071}, 0},
		{4, 128, 64, 10000, 0.25, false, []int32{17, 18}, 0},
		{32, 96, 96, 10000, 1, true, []int32{5, 6, 7}, 1.1902380714238083}, // Phi-3 128K: LongRoPE
	} {
		for _, neox := range []bool{false, true} {
			rp := &backend.RoPE{Neox: neox, Dims: c.dims, Base: c.base, PosScale: c.scale, AttnFactor: c.mscale}
			if c.factors {
				rp.FreqFactors = make([]float32, c.dims/2)
				for i := range rp.FreqFactors {
					rp.FreqFactors[i] = 1 + 7*r.Float32()
				}
			}
			rows, width := len(c.pos), c.heads*c.headDim
			x := randomFloats(r, rows*width, 1)
			want := cpuTensor(cb, x)
			cb.RoPE(want, c.heads, c.headDim, rows, c.pos, rp)
			for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
				t.Run(fmt.Sprintf("heads%d_d%d_dims%d_rows%d_neox%v_m%g_%v", c.heads, c.headDim, c.dims, rows, neox, c.mscale, o), func(t *testing.T) {
					xr := devFloats(t, dev, x, 0)
					pos := append([]int32(nil), c.pos...)
					e.RoPE(xr, c.heads, c.headDim, rows, pos, rp)
					pos[0] = 99 // copied at encode time
					runEncoded(t, dev, e, o)
					got := readFloats(xr)
					for row := 0; row < rows; row++ {
						var scale float64
						for _, v := range x[row*width : (row+1)*width] {
							scale = math.Max(scale, math.Abs(float64(v)))
						}
						for i := row * width; i < (row+1)*width; i++ {
							if d := math.Abs(float64(got[i] - want.D[i])); !(d <= 1e-6*scale) {
								t.Fatalf("row %d (pos %d) element %d: %v, want %v", row, c.pos[row], i-row*width, got[i], want.D[i])
							}
						}
					}
				})
			}
		}
	}
}
