package encoder

import (
	"encoding/binary"
	"math"

	"nibble/engine/backend"
	"nibble/metal/device"
)

// RoPE rotates the first r.Dims elements of each of the heads heads
// (headDim apart) of rows rows of x in place, row i at position pos[i]:
// pairs (2j, 2j+1), or (j, j+Dims/2) for NeoX, by pos·PosScale·
// Base^(-2j/Dims)/FreqFactors[j] radians, cos and sin times AttnFactor
// (LongRoPE's; 0 = 1), with YaRN when r.ExtFactor ≠ 0 (RoPEFrequencies,
// ropeMScale). The positions are copied now; the
// pairs' frequencies (computed here in float64, as the CPU backend computes
// them) once per encoder for each set of parameters.
//
// kernel_rope_{norm,neox}_f32: grid (rows, head groups), a thread per pair
// that computes its sin and cos once for the heads of its group.
func (e *Encoder) RoPE(x Region, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	if !e.ropeValid("rope", heads, headDim, rows, len(pos), r) || !e.ewCheck("rope", rows*heads*headDim, x) || rows == 0 || heads == 0 {
		return
	}
	p := make([]byte, 4*rows)
	for i, v := range pos[:rows] {
		if v < -1<<24 || v > 1<<24 {
			// The kernel takes the position as a float: exact up to 2^24.
			e.Failf("rope: position %d", v)
			return
		}
		binary.LittleEndian.PutUint32(p[4*i:], uint32(v))
	}
	mscale := ropeMScale(r)
	pairs := r.Dims / 2
	// Heads per threadgroup: enough threadgroups for a decode row, few
	// sin/cos per head for a batch.
	hpg := min(heads, 8)
	if rows < 8 {
		hpg = min(heads, 2)
	}
	name := "kernel_rope_norm_f32"
	if r.Neox {
		name = "kernel_rope_neox_f32"
	}
	e.dispatch(device.Dispatch{
		Pipeline: e.pipeline(name),
		Groups:   [3]int{rows, (heads + hpg - 1) / hpg, 1},
		Threads:  [3]int{(pairs + 31) &^ 31, 1, 1},
		Inline:   []device.Inline{{Index: 0, Data: RoPEArgs{Heads: u32(heads), HeadDim: u32(headDim), Pairs: u32(pairs), HPG: u32(hpg), MScale: mscale}.Bytes()}},
		Buffers:  []device.Binding{x.bind(1), e.upload(p).bind(2), e.ropeFreqs(r).bind(3)},
	})
}

// ropeValid checks RoPE's parameters for an op (its contract in RoPE).
func (e *Encoder) ropeValid(op string, heads, headDim, rows, npos int, r *backend.RoPE) bool {
	switch {
	case r == nil:
		e.Failf("%s: no parameters", op)
		return false
	case heads < 0 || rows < 0 || npos < rows:
		e.Failf("%s: %d heads, %d rows, %d positions", op, heads, rows, npos)
		return false
	case r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > headDim || r.Dims > 2048:
		e.Failf("%s: %d rotated dims of a head of %d", op, r.Dims, headDim)
		return false
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		e.Failf("%s: %d frequency factors for %d dims", op, len(r.FreqFactors), r.Dims)
		return false
	case !(r.AttnFactor >= 0) || math.IsInf(float64(r.AttnFactor), 0):
		e.Failf("%s: attention factor %g", op, r.AttnFactor)
		return false
	case r.ExtFactor != 0 && !yarnValid(r):
		e.Failf(op+": YaRN with extrapolation factor %g, betas %g and %g, original context %d, position scale %g, base %g",
			r.ExtFactor, r.BetaFast, r.BetaSlow, r.OrigCtx, r.PosScale, r.Base)
		return false
	}
	return true
}

// ropeFreqs are the pairs' angles per position (RoPEFrequencies), each as
// two float32s hi + lo, the kernel's float2: it forms pos·freq from both to
// about 1e-14 relative, then reduces it mod 2π. They are uploaded once per
// encoder for each set of parameters.
func (e *Encoder) ropeFreqs(r *backend.RoPE) Region {
	k := binary.LittleEndian.AppendUint32(append(e.key[:0], 'r'), uint32(r.Dims))
	for _, f := range []float32{r.Base, r.PosScale, r.ExtFactor, r.BetaFast, r.BetaSlow} {
		k = binary.LittleEndian.AppendUint32(k, math.Float32bits(f))
	}
	k = binary.LittleEndian.AppendUint64(k, uint64(r.OrigCtx))
	for _, f := range r.FreqFactors {
		k = binary.LittleEndian.AppendUint32(k, math.Float32bits(f))
	}
	e.key = k
	return e.constant(k, func() ([]byte, error) {
		b := make([]byte, 4*r.Dims)
		for j, f := range RoPEFrequencies(r) {
			hi := float32(f)
			binary.LittleEndian.PutUint32(b[8*j:], math.Float32bits(hi))
			binary.LittleEndian.PutUint32(b[8*j+4:], math.Float32bits(float32(f-float64(hi))))
		}
		return b, nil
	})
}

// RoPEFrequencies are the pairs' angles per position in float64:
// scale·base^(-2j/dims)/factor_j (engine/cpu's ropeFrequencies). With YaRN
// (ExtFactor ≠ 0) pair j's angle is ggml's rope_yarn blend of the
// interpolated angle θ·scale and the extrapolated θ, θ·(scale·(1−r_j) +
// r_j) with r_j = ramp_j·ExtFactor: still a constant per pair times the
// position, so the kernel is the same.
func RoPEFrequencies(r *backend.RoPE) []float64 {
	scale := float64(r.PosScale)
	if scale == 0 {
		scale = 1
	}
	var low, high float64
	if r.ExtFactor != 0 {
		low, high = yarnCorrDims(r)
	}
	freq := make([]float64, r.Dims/2)
	for j := range freq {
		theta := math.Pow(float64(r.Base), -2*float64(j)/float64(r.Dims))
		if r.FreqFactors != nil {
			theta /= float64(r.FreqFactors[j])
		}
		if r.ExtFactor == 0 {
			freq[j] = scale * theta
			continue
		}
		mix := yarnRamp(low, high, j) * float64(r.ExtFactor)
		freq[j] = theta * (scale*(1-mix) + mix)
	}
	return freq
}

// yarnValid says whether r's YaRN parameters give finite frequencies: a
// base above 1, an original context and both betas positive, a position
// scale in (0, 1].
func yarnValid(r *backend.RoPE) bool {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	return finite(r.ExtFactor) && r.Base > 1 && finite(r.Base) && r.OrigCtx > 0 &&
		r.BetaFast > 0 && finite(r.BetaFast) && r.BetaSlow > 0 && finite(r.BetaSlow) &&
		r.PosScale > 0 && r.PosScale <= 1
}

// yarnCorrDims are ggml's ggml_rope_yarn_corr_dims: the pairs from the one
// whose wavelength fits BetaFast rotations into OrigCtx positions (floor)
// to the one that fits BetaSlow (ceil), clamped to [0, dims−1]. In float32
// as ggml (and the CPU backend) compute them, so the floor and ceil fall
// alike.
func yarnCorrDims(r *backend.RoPE) (low, high float64) {
	log32 := func(x float32) float32 { return float32(math.Log(float64(x))) }
	dim := func(rotations float32) float64 {
		return float64(float32(r.Dims) * log32(float32(r.OrigCtx)/(rotations*2*math.Pi)) / (2 * log32(r.Base)))
	}
	return max(0, math.Floor(dim(r.BetaFast))), min(float64(r.Dims-1), math.Ceil(dim(r.BetaSlow)))
}

// yarnRamp is ggml's rope_yarn_ramp for pair j: 1 below low (extrapolate),
// 0 above high (interpolate), linear between.
func yarnRamp(low, high float64, j int) float64 {
	y := (float64(j) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

// ropeMScale is what the kernel multiplies cos and sin by: AttnFactor (0 =
// 1), times YaRN's magnitude correction 1 + 0.1·ln(1/PosScale) when
// ExtFactor ≠ 0 (ggml's rope_yarn).
func ropeMScale(r *backend.RoPE) float32 {
	m := r.AttnFactor
	if m == 0 {
		m = 1
	}
	if r.ExtFactor != 0 {
		m *= float32(1 + 0.1*math.Log(1/float64(r.PosScale)))
	}
	return m
}
