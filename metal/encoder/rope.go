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
// (LongRoPE's; 0 = 1). The positions are copied now; the
// pairs' frequencies (computed here in float64, as the CPU backend computes
// them) once per encoder for each set of parameters.
//
// kernel_rope_{norm,neox}_f32: grid (rows, head groups), a thread per pair
// that computes its sin and cos once for the heads of its group.
func (e *Encoder) RoPE(x Region, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	switch {
	case r == nil:
		e.Failf("rope: no parameters")
		return
	case heads < 0 || rows < 0 || len(pos) < rows:
		e.Failf("rope: %d heads, %d rows, %d positions", heads, rows, len(pos))
		return
	case r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > headDim || r.Dims > 2048:
		e.Failf("rope: %d rotated dims of a head of %d", r.Dims, headDim)
		return
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		e.Failf("rope: %d frequency factors for %d dims", len(r.FreqFactors), r.Dims)
		return
	case !(r.AttnFactor >= 0) || math.IsInf(float64(r.AttnFactor), 0):
		e.Failf("rope: attention factor %g", r.AttnFactor)
		return
	case !e.ewCheck("rope", rows*heads*headDim, x) || rows == 0 || heads == 0:
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
	mscale := r.AttnFactor
	if mscale == 0 {
		mscale = 1
	}
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

// ropeFreqs are the pairs' angles per position, scale·base^(-2j/dims)/
// factor_j in float64 (engine/cpu's ropeFrequencies), each as two float32s
// hi + lo, the kernel's float2: it forms pos·freq from both to about 1e-14
// relative, then reduces it mod 2π. They are uploaded once per encoder for
// each set of parameters.
func (e *Encoder) ropeFreqs(r *backend.RoPE) Region {
	k := binary.LittleEndian.AppendUint32(append(e.key[:0], 'r'), uint32(r.Dims))
	k = binary.LittleEndian.AppendUint32(k, math.Float32bits(r.Base))
	k = binary.LittleEndian.AppendUint32(k, math.Float32bits(r.PosScale))
	for _, f := range r.FreqFactors {
		k = binary.LittleEndian.AppendUint32(k, math.Float32bits(f))
	}
	e.key = k
	return e.constant(k, func() ([]byte, error) {
		scale := float64(r.PosScale)
		if scale == 0 {
			scale = 1
		}
		b := make([]byte, 4*r.Dims)
		for j := 0; j < r.Dims/2; j++ {
			f := scale * math.Pow(float64(r.Base), -2*float64(j)/float64(r.Dims))
			if r.FreqFactors != nil {
				f /= float64(r.FreqFactors[j])
			}
			hi := float32(f)
			binary.LittleEndian.PutUint32(b[8*j:], math.Float32bits(hi))
			binary.LittleEndian.PutUint32(b[8*j+4:], math.Float32bits(float32(f-float64(hi))))
		}
		return b, nil
	})
}
