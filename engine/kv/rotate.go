package kv

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Rotation is the optional QuaRot-style orthogonal transform
// (docs/ARCHITECTURE.md, "Rotation"):
// K is stored rotated, R·k with R = H·diag(s)/√D (H the Walsh–Hadamard
// matrix, s random signs), and queries are rotated the same way before they
// meet the cache, so q·k is unchanged. It spreads an outlier channel, which
// would otherwise own the scale of its whole quantization group, across all
// channels. V is never rotated.
type Rotation struct {
	signs []float32
	norm  float32
}

// rotationSeed fixes the signs: a cache and its readers must agree.
const rotationSeed = 0x9E3779B97F4A7C15

// NewRotation builds the transform for head dim d (a power of two).
func NewRotation(d int) (*Rotation, error) {
	if d <= 0 || d&(d-1) != 0 {
		return nil, fmt.Errorf("kv: rotation needs a power-of-two head dim, got %d", d)
	}
	rng := rand.New(rand.NewPCG(rotationSeed, uint64(d)))
	r := &Rotation{signs: make([]float32, d), norm: float32(1 / math.Sqrt(float64(d)))}
	for i := range r.signs {
		r.signs[i] = 1
		if rng.Uint64()&1 == 1 {
			r.signs[i] = -1
		}
	}
	return r, nil
}

// Apply writes R·src into dst (len = head dim; dst may be src).
func (r *Rotation) Apply(dst, src []float32) {
	d := len(r.signs)
	dst, src = dst[:d], src[:d]
	for i, s := range r.signs {
		dst[i] = src[i] * s
	}
	hadamard(dst, r.norm)
}

// Invert writes R⁻¹·src = Rᵀ·src = diag(s)·H·src/√D into dst (dst may be src).
func (r *Rotation) Invert(dst, src []float32) {
	d := len(r.signs)
	dst, src = dst[:d], src[:d]
	copy(dst, src)
	hadamard(dst, r.norm)
	for i, s := range r.signs {
		dst[i] *= s
	}
}

// hadamard applies the fast Walsh–Hadamard transform to x in place, scaled by norm.
func hadamard(x []float32, norm float32) {
	d := len(x)
	for h := 1; h < d; h *= 2 {
		for i := 0; i < d; i += 2 * h {
			a, b := x[i:i+h], x[i+h:i+2*h]
			for j := range a {
				a[j], b[j] = a[j]+b[j], a[j]-b[j]
			}
		}
	}
	for i := range x {
		x[i] *= norm
	}
}
