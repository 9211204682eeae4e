package kv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Rotation is the QuaRot-style orthogonal transform of K
// (docs/ARCHITECTURE.md, "Rotation"): K is stored rotated, R·k, and queries
// are rotated the same way before they meet the cache, so q·k is unchanged.
// It spreads an outlier channel, which would otherwise own the scale of its
// whole quantization group, across all channels. V is never rotated.
//
// For a head dim d = P·m, P the largest power of two dividing d and m odd,
// R·x is, in order:
//
//	(a) x[i] *= s[i], fixed random signs;
//	(b) a Walsh–Hadamard transform scaled by 1/√P on each of the m blocks
//	    x[b·P : (b+1)·P];
//	(c) for each j < P, the m values x[b·P + j] (b < m) replaced by Q_m
//	    times them, Q_m the orthonormal m-point DCT-II matrix.
//
// For a power-of-two d (m = 1) step (c) is the identity and R is the
// randomized Hadamard transform H·diag(s)/√d. The Metal kernels implement
// the same definition, so a cache's bytes do not depend on the backend.
type Rotation struct {
	signs  []float32
	norm   float32   // 1/√P
	block  int       // P
	blocks int       // m
	dct    []float32 // Q_m row-major, Q[k][n] at k·m + n (nil when m = 1)
}

// rotationSeed fixes the signs: a cache and its readers must agree.
const rotationSeed = 0x9E3779B97F4A7C15

// MaxRotationDim is the largest head dim a Rotation is built for (the
// largest the models accept); it bounds the transform's stack scratch.
const MaxRotationDim = 512

// NewRotation builds the transform for head dim d, a positive multiple of 8
// up to MaxRotationDim.
func NewRotation(d int) (*Rotation, error) {
	if d <= 0 || d%8 != 0 || d > MaxRotationDim {
		return nil, fmt.Errorf("kv: rotation needs a head dim that is a positive multiple of 8 up to %d, got %d", MaxRotationDim, d)
	}
	p := d & -d
	m := d / p
	rng := rand.New(rand.NewPCG(rotationSeed, uint64(d)))
	r := &Rotation{signs: make([]float32, d), norm: float32(1 / math.Sqrt(float64(p))), block: p, blocks: m}
	for i := range r.signs {
		r.signs[i] = 1
		if rng.Uint64()&1 == 1 {
			r.signs[i] = -1
		}
	}
	if m > 1 {
		r.dct = dctII(m)
	}
	return r, nil
}

// dctII is the orthonormal m-point DCT-II matrix, row-major:
// Q[k][n] = c_k·cos(π(2n+1)k/(2m)), c_0 = √(1/m), c_k = √(2/m) for k > 0,
// computed in float64.
func dctII(m int) []float32 {
	q := make([]float32, m*m)
	for k := range m {
		c := math.Sqrt(2 / float64(m))
		if k == 0 {
			c = math.Sqrt(1 / float64(m))
		}
		for n := range m {
			q[k*m+n] = float32(c * math.Cos(math.Pi*float64((2*n+1)*k)/float64(2*m)))
		}
	}
	return q
}

// Signs are the transform's random signs s (step a), for backends that
// build R themselves; the caller must not change them.
func (r *Rotation) Signs() []float32 { return r.signs }

// Mixing is Q_m row-major (step c), nil for a power-of-two head dim; the
// caller must not change it.
func (r *Rotation) Mixing() []float32 { return r.dct }

// Dim is the head dim the transform is for.
func (r *Rotation) Dim() int { return len(r.signs) }

// Apply writes R·src into dst (len = head dim; dst may be src).
func (r *Rotation) Apply(dst, src []float32) {
	d := len(r.signs)
	dst, src = dst[:d], src[:d]
	for i, s := range r.signs {
		dst[i] = src[i] * s
	}
	for b := 0; b < d; b += r.block {
		hadamard(dst[b:b+r.block], r.norm)
	}
	if r.dct != nil {
		r.mixBlocks(dst, false)
	}
}

// Invert writes R⁻¹·src = Rᵀ·src into dst (dst may be src): the three
// steps transposed, in reverse order.
func (r *Rotation) Invert(dst, src []float32) {
	d := len(r.signs)
	dst, src = dst[:d], src[:d]
	copy(dst, src)
	if r.dct != nil {
		r.mixBlocks(dst, true)
	}
	for b := 0; b < d; b += r.block {
		hadamard(dst[b:b+r.block], r.norm)
	}
	for i, s := range r.signs {
		dst[i] *= s
	}
}

// mixBlocks replaces, for each j < P, the m values x[b·P + j] by Q_m (or,
// transposed, Q_mᵀ) times them.
func (r *Rotation) mixBlocks(x []float32, transpose bool) {
	var scratch [MaxRotationDim]float32
	p, m := r.block, r.blocks
	out := scratch[:len(x)]
	for k := range m {
		o := out[k*p : (k+1)*p]
		clear(o)
		for n := range m {
			q := r.dct[k*m+n]
			if transpose {
				q = r.dct[n*m+k]
			}
			for j, v := range x[n*p : (n+1)*p] {
				o[j] += q * v
			}
		}
	}
	copy(x, out)
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

// RotateMode says whether a session's cache stores K rotated. The zero
// value, RotateAuto, rotates q4 caches and not q8 or f16 ones: on the
// trained model rotation lifts q4's needle and top-1 figures, while q8 has
// nothing left to gain (docs/ARCHITECTURE.md, "Rotation").
type RotateMode uint8

const (
	RotateAuto RotateMode = iota
	RotateOn
	RotateOff
)

func (m RotateMode) String() string {
	switch m {
	case RotateAuto:
		return "auto"
	case RotateOn:
		return "on"
	case RotateOff:
		return "off"
	}
	return fmt.Sprintf("rotate(%d)", uint8(m))
}

// ParseRotateMode accepts auto, on and off.
func ParseRotateMode(s string) (RotateMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return RotateAuto, nil
	case "on":
		return RotateOn, nil
	case "off":
		return RotateOff, nil
	}
	return 0, fmt.Errorf("unknown KV rotation mode %q (want auto, on or off)", s)
}

// Rotates reports whether a cache of type t stores K rotated under m: never
// for f16 (no groups for an outlier to spoil), always for a quantized type
// when on, and for q4 alone when auto.
func (m RotateMode) Rotates(t Type) bool {
	switch {
	case t == F16 || m == RotateOff:
		return false
	case m == RotateOn:
		return true
	}
	return t == Q4
}
