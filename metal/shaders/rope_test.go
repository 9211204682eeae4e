//go:build linux

package shaders

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// ropeFreqs are the pairs' angles per position as kernel_rope reads them:
// the CPU backend's float64 frequencies (engine/cpu ropeFrequencies) split
// into float32 hi + lo.
func ropeFreqs(r *backend.RoPE) []float32 {
	scale := float64(r.PosScale)
	if scale == 0 {
		scale = 1
	}
	out := make([]float32, r.Dims)
	for i := 0; i < r.Dims/2; i++ {
		f := scale * math.Pow(float64(r.Base), -2*float64(i)/float64(r.Dims))
		if r.FreqFactors != nil {
			f /= float64(r.FreqFactors[i])
		}
		hi := float32(f)
		out[2*i], out[2*i+1] = hi, float32(f-float64(hi))
	}
	return out
}

// kernel_rope_{norm,neox}_f32 against the CPU backend's RoPE (angles in
// float64), with LongRoPE's attention factor (mscale) in some cases. Tolerance: |Δ| ≤ 1e-6·max|x| of the row at every position (the
// kernel's angle is within ~3e-7 rad of the CPU's, then one rounding each
// for sin, cos and the products).
func TestRoPE(t *testing.T) {
	d, l := emu(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(51, 52))
	for i, c := range []struct {
		heads, headDim, dims int
		base, scale          float32
		factors              bool
		pos                  []int32
		mscale               float32 // 0: none
	}{
		{32, 128, 128, 500000, 1, true, []int32{0, 1, 2, 4095, 131071, 77, 1 << 20}, 0},
		{8, 64, 64, 10000, 1, false, []int32{5}, 0},
		{14, 64, 64, 1e6, 1, false, []int32{4096, 4097, 4098}, 0},
		{4, 256, 256, 10000, 1, true, []int32{33, 0, 100000}, 0},
		{3, 128, 64, 1e6, 0.25, false, []int32{7, 65535}, 0},
		{5, 80, 80, 10000, 1, false, []int32{1, 2, 3, 4000}, 0},
		{1, 128, 32, 10000, 0.5, true, []int32{12345}, 0},
		// Phi-3's shapes: LongRoPE's factors and attention factor.
		{32, 96, 96, 10000, 1, true, []int32{0, 3, 4095, 70000}, 1.1902380714238083},
		{4, 64, 64, 10000, 1, false, []int32{9, 10}, 0.8},
	} {
		for _, neox := range []bool{false, true} {
			rp := &backend.RoPE{Neox: neox, Dims: c.dims, Base: c.base, PosScale: c.scale, AttnFactor: c.mscale}
			mscale := c.mscale
			if mscale == 0 {
				mscale = 1
			}
			if c.factors {
				rp.FreqFactors = make([]float32, c.dims/2)
				for i := range rp.FreqFactors {
					rp.FreqFactors[i] = 1 + 7*r.Float32()
				}
			}
			rows, width := len(c.pos), c.heads*c.headDim
			x := ewRandom(r, rows*width, 1)
			want := &cpu.Tensor{D: append([]float32(nil), x...)}
			cb.RoPE(want, c.heads, c.headDim, rows, c.pos, rp)
			name := "kernel_rope_norm_f32"
			if neox {
				name = "kernel_rope_neox_f32"
			}
			p := pipeline(t, l, name)
			pos := make([]byte, 4*rows)
			for i, v := range c.pos {
				binary.LittleEndian.PutUint32(pos[4*i:], uint32(v))
			}
			hpg := []int{1, 3, 8, 32}[i%4]
			for _, o := range orders {
				t.Run(fmt.Sprintf("heads%d_d%d_dims%d_neox%v_hpg%d_m%g_%v", c.heads, c.headDim, c.dims, neox, hpg, mscale, o), func(t *testing.T) {
					xb := buffer(t, d, f32Bytes(x))
					run(t, d, o, device.Dispatch{
						Pipeline: p, Groups: [3]int{rows, (c.heads + hpg - 1) / hpg, 1}, Threads: [3]int{(c.dims/2 + 31) / 32 * 32, 1, 1},
						Inline:  []device.Inline{{Index: 0, Data: encoder.RoPEArgs{Heads: uint32(c.heads), HeadDim: uint32(c.headDim), Pairs: uint32(c.dims / 2), HPG: uint32(hpg), MScale: mscale}.Bytes()}},
						Buffers: []device.Binding{{Index: 1, Buffer: xb}, {Index: 2, Buffer: buffer(t, d, pos)}, {Index: 3, Buffer: buffer(t, d, f32Bytes(ropeFreqs(rp)))}},
					})
					got := f32s(xb.Bytes())
					worst := 0.0
					for row := 0; row < rows; row++ {
						var scale float64
						for _, v := range x[row*width : (row+1)*width] {
							scale = math.Max(scale, math.Abs(float64(v)))
						}
						for i := row * width; i < (row+1)*width; i++ {
							e := math.Abs(float64(got[i]-want.D[i])) / scale
							worst = max(worst, e)
							if !(e <= 1e-6) {
								t.Fatalf("row %d (pos %d) head %d element %d: %v, want %v", row, c.pos[row], (i-row*width)/c.headDim, i%c.headDim, got[i], want.D[i])
							}
						}
					}
					t.Logf("largest |Δ|/max|x| %.2g", worst)
				})
			}
		}
	}
}

// yarnRoPE64 is ggml's rope_yarn written out for one row in float64, the
// reference of TestRoPEYaRN: pair j's extrapolated angle θ = pos·base^
// (-2j/dims)/factor_j, its interpolated angle θ·scale, blended by the ramp
// over the correction dims (times ext), and cos and sin times the
// attention factor and 1 + 0.1·ln(1/scale).
func yarnRoPE64(v []float32, pos int32, r *backend.RoPE) {
	dims := float64(r.Dims)
	corr := func(rot float32) float64 {
		return dims * math.Log(float64(r.OrigCtx)/(float64(rot)*2*math.Pi)) / (2 * math.Log(float64(r.Base)))
	}
	low := math.Max(0, math.Floor(corr(r.BetaFast)))
	high := math.Min(dims-1, math.Ceil(corr(r.BetaSlow)))
	mscale := float64(r.AttnFactor)
	if mscale == 0 {
		mscale = 1
	}
	mscale *= 1 + 0.1*math.Log(1/float64(r.PosScale))
	half := r.Dims / 2
	for j := range half {
		extrap := float64(pos) * math.Pow(float64(r.Base), -2*float64(j)/dims)
		if r.FreqFactors != nil {
			extrap /= float64(r.FreqFactors[j])
		}
		interp := float64(r.PosScale) * extrap
		ramp := 1 - math.Min(1, math.Max(0, (float64(j)-low)/math.Max(0.001, high-low)))
		mix := ramp * float64(r.ExtFactor)
		theta := interp*(1-mix) + extrap*mix
		c, s := math.Cos(theta)*mscale, math.Sin(theta)*mscale
		a, b := 2*j, 2*j+1
		if r.Neox {
			a, b = j, j+half
		}
		x0, x1 := float64(v[a]), float64(v[b])
		v[a], v[b] = float32(x0*c-x1*s), float32(x0*s+x1*c)
	}
}

// YaRN (backend.RoPE's ExtFactor, BetaFast, BetaSlow, OrigCtx) through
// encoder.RoPE: the blend folded into each pair's frequency on the host,
// the magnitude correction into mscale, the kernel unchanged. Against the
// CPU backend's RoPE and against yarnRoPE64; tolerance 1e-6·max|x| of the
// row, as TestRoPE. Each case also checks that plain RoPE at the same
// scale is far off (the test sees YaRN missing).
func TestRoPEYaRN(t *testing.T) {
	d, l := emu(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(53, 54))
	for _, c := range []struct {
		heads, headDim int
		rope           backend.RoPE
		factors        bool
		pos            []int32
	}{
		// gpt-oss: NeoX, base 150000, factor 32 over 4096 positions, betas 32 and 1.
		{8, 64, backend.RoPE{Neox: true, Dims: 64, Base: 150000, PosScale: 1.0 / 32, ExtFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 4096},
			false, []int32{0, 1, 127, 4095, 4096, 70000, 131071}},
		{3, 128, backend.RoPE{Dims: 128, Base: 10000, PosScale: 0.25, ExtFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 2048},
			false, []int32{5, 9000}},
		// A partial blend, an attention factor and per-pair divisors.
		{2, 80, backend.RoPE{Neox: true, Dims: 64, Base: 1e6, PosScale: 0.125, ExtFactor: 0.5, BetaFast: 16, BetaSlow: 2, OrigCtx: 8192, AttnFactor: 0.9},
			true, []int32{3, 33000, 100000}},
	} {
		rp := c.rope
		if c.factors {
			rp.FreqFactors = make([]float32, rp.Dims/2)
			for i := range rp.FreqFactors {
				rp.FreqFactors[i] = 1 + 3*r.Float32()
			}
		}
		rows, width := len(c.pos), c.heads*c.headDim
		x := ewRandom(r, rows*width, 1)
		want := append([]float32(nil), x...)
		for row, p := range c.pos {
			for h := range c.heads {
				yarnRoPE64(want[row*width+h*c.headDim:], p, &rp)
			}
		}
		twin := &cpu.Tensor{D: append([]float32(nil), x...)}
		cb.RoPE(twin, c.heads, c.headDim, rows, c.pos, &rp)
		plain := rp
		plain.ExtFactor = 0
		for _, o := range orders {
			t.Run(fmt.Sprintf("heads%d_d%d_dims%d_neox%v_ext%g_%v", c.heads, c.headDim, rp.Dims, rp.Neox, rp.ExtFactor, o), func(t *testing.T) {
				rotate := func(rp *backend.RoPE) []float32 {
					enc := encoder.New(d, l)
					defer enc.Close()
					xr := encoder.Region{Buf: buffer(t, d, f32Bytes(x)), Len: 4 * len(x)}
					enc.RoPE(xr, c.heads, c.headDim, rows, c.pos, rp)
					if err := enc.Err(); err != nil {
						t.Fatal(err)
					}
					submit(t, d, o, enc.List())
					return f32s(xr.Buf.Bytes())
				}
				got, off := rotate(&rp), rotate(&plain)
				worst, far := 0.0, 0.0
				for row := range rows {
					var scale float64
					for _, v := range x[row*width : (row+1)*width] {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i := row * width; i < (row+1)*width; i++ {
						e := math.Abs(float64(got[i]-want[i])) / scale
						ec := math.Abs(float64(got[i]-twin.D[i])) / scale
						worst = max(worst, e, ec)
						far = max(far, math.Abs(float64(off[i]-want[i]))/scale)
						if !(e <= 1e-6) || !(ec <= 1e-6) {
							t.Fatalf("row %d (pos %d) head %d element %d: %v, want %v (float64 rope_yarn), %v (CPU)",
								row, c.pos[row], (i-row*width)/c.headDim, i%c.headDim, got[i], want[i], twin.D[i])
						}
					}
				}
				if !(far > 1e-2) {
					t.Fatalf("plain RoPE is within %.2g of YaRN: the test would not see it missing", far)
				}
				t.Logf("largest |Δ|/max|x| %.2g (plain RoPE: %.2g)", worst, far)
			})
		}
	}
	enc := encoder.New(d, l)
	defer enc.Close()
	xr := encoder.Region{Buf: buffer(t, d, make([]byte, 4*64)), Len: 4 * 64}
	for _, bad := range []backend.RoPE{
		{Dims: 64, Base: 10000, PosScale: 0.25, ExtFactor: 1, BetaFast: 32, BetaSlow: 1},             // no original context
		{Dims: 64, Base: 10000, PosScale: 0, ExtFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}, // no scale
		{Dims: 64, Base: 10000, PosScale: 0.5, ExtFactor: 1, BetaFast: 0, BetaSlow: 1, OrigCtx: 4096},
	} {
		enc.RoPE(xr, 1, 64, 1, []int32{3}, &bad)
		if err := enc.Err(); err == nil {
			t.Errorf("YaRN %+v: no error", bad)
		} else {
			t.Log(err)
		}
		enc.Reset()
	}
}
