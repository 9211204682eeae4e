package kv

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rotationDims covers power-of-two head dims (m = 1, the randomized
// Hadamard transform) and the others (m = 3, 5, 3 with P = 32 and 64).
var rotationDims = []int{64, 96, 80, 128, 192, 256, 40, 512}

func randVec(rng *rand.Rand, d int) []float32 {
	x := make([]float32, d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// R is orthogonal for every head dim: norms and dot products (q·k) are
// kept, and R⁻¹R is the identity.
func TestRotationIsOrthogonal(t *testing.T) {
	for _, d := range rotationDims {
		r, err := NewRotation(d)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(d)))
		q, k := randVec(rng, d), randVec(rng, d)
		rq, rk := make([]float32, d), make([]float32, d)
		r.Apply(rq, q)
		r.Apply(rk, k)
		nq, nrq := dot64(q, q), dot64(rq, rq)
		if math.Abs(math.Sqrt(nrq)-math.Sqrt(nq)) > 1e-6*math.Sqrt(nq) {
			t.Errorf("d %d: ‖x‖ %g became %g", d, math.Sqrt(nq), math.Sqrt(nrq))
		}
		if qk, rqk := dot64(q, k), dot64(rq, rk); math.Abs(qk-rqk) > 1e-5*math.Sqrt(nq*dot64(k, k)) {
			t.Errorf("d %d: q·k %g became %g", d, qk, rqk)
		}
		// R⁻¹R, column by column.
		e := make([]float32, d)
		for i := range d {
			clear(e)
			e[i] = 1
			r.Apply(e, e)
			r.Invert(e, e)
			for j, v := range e {
				want := float32(0)
				if i == j {
					want = 1
				}
				if math.Abs(float64(v-want)) > 1e-6 {
					t.Fatalf("d %d: (R⁻¹R)[%d][%d] = %g", d, j, i, v)
				}
			}
		}
		// In place gives the same, and the transform is fixed for a d.
		r2, _ := NewRotation(d)
		r2.Apply(q, q)
		for i := range q {
			if q[i] != rq[i] {
				t.Fatalf("d %d: in-place or second rotation differs at %d", d, i)
			}
		}
	}
	for _, d := range []int{0, -8, 12, 520, 1024} {
		if _, err := NewRotation(d); err == nil {
			t.Errorf("head dim %d accepted", d)
		}
	}
	if err := (Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 96, Ctx: 8, Rotate: true}).Validate(); err != nil {
		t.Errorf("config with rotation and head dim 96: %v", err)
	}
}

// An outlier channel is spread over every channel: R·e_c has entries of at
// most √2/√d (each block's Hadamard spreads it to ±1/√P, and no DCT-II
// entry exceeds √(2/m)); with the rest of the vector ordinary, the largest
// element stays within 2·‖x‖/√d.
func TestRotationSpreadsAnOutlierChannel(t *testing.T) {
	for _, d := range rotationDims {
		r, _ := NewRotation(d)
		rng := rand.New(rand.NewPCG(2, uint64(d)))
		for _, c := range []int{0, d / 3, d - 1} {
			x := randVec(rng, d)
			for i := range x {
				x[i] *= 0.01
			}
			x[c] = 50
			rx := make([]float32, d)
			r.Apply(rx, x)
			norm := math.Sqrt(dot64(x, x))
			var peak float64
			for _, v := range rx {
				peak = max(peak, math.Abs(float64(v)))
			}
			if bound := 2 * norm / math.Sqrt(float64(d)); peak > bound {
				t.Errorf("d %d, outlier at %d: max |Rx| %g > 2‖x‖/√d = %g", d, c, peak, bound)
			}
			clear(x)
			x[c] = 1
			r.Apply(rx, x)
			for i, v := range rx {
				if math.Abs(float64(v)) > math.Sqrt2/math.Sqrt(float64(d))+1e-6 {
					t.Fatalf("d %d: (R·e_%d)[%d] = %g above √2/√d", d, c, i, v)
				}
			}
		}
	}
}

// A power-of-two head dim keeps the randomized Hadamard transform
// H·diag(s)/√d exactly, element for element, so caches written before the
// general transform keep their bytes.
func TestRotationPowerOfTwoIsHadamard(t *testing.T) {
	for _, d := range []int{8, 64, 128, 256, 512} {
		r, _ := NewRotation(d)
		signs := rand.New(rand.NewPCG(rotationSeed, uint64(d)))
		x := randVec(rand.New(rand.NewPCG(3, uint64(d))), d)
		want := make([]float32, d)
		for i := range x {
			want[i] = x[i]
			if signs.Uint64()&1 == 1 {
				want[i] = -x[i]
			}
		}
		hadamard(want, float32(1/math.Sqrt(float64(d))))
		got := make([]float32, d)
		r.Apply(got, x)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("d %d: element %d is %g, the Hadamard transform gives %g", d, i, got[i], want[i])
			}
		}
	}
}

// The DCT-II matrix is orthonormal in float64 before rounding, so in
// float32 QᵀQ is the identity to rounding.
func TestDCTIIIsOrthonormal(t *testing.T) {
	for _, m := range []int{3, 5, 7, 63} {
		q := dctII(m)
		for a := range m {
			for b := range m {
				var s float64
				for k := range m {
					s += float64(q[k*m+a]) * float64(q[k*m+b])
				}
				want := 0.0
				if a == b {
					want = 1
				}
				if math.Abs(s-want) > 1e-6 {
					t.Fatalf("m %d: (QᵀQ)[%d][%d] = %g", m, a, b, s)
				}
			}
		}
	}
}

func TestRotateMode(t *testing.T) {
	for _, c := range []struct {
		m           RotateMode
		f16, q8, q4 bool
		name        string
	}{{RotateAuto, false, false, true, "auto"}, {RotateOn, false, true, true, "on"}, {RotateOff, false, false, false, "off"}} {
		if got := [3]bool{c.m.Rotates(F16), c.m.Rotates(Q8), c.m.Rotates(Q4)}; got != [3]bool{c.f16, c.q8, c.q4} {
			t.Errorf("%v rotates f16, q8, q4: %v", c.m, got)
		}
		if p, err := ParseRotateMode(c.name); err != nil || p != c.m || c.m.String() != c.name {
			t.Errorf("%q parsed as %v (%v), String %q", c.name, p, err, c.m.String())
		}
	}
	if _, err := ParseRotateMode("yes"); err == nil {
		t.Error(`"yes" accepted`)
	}
}
