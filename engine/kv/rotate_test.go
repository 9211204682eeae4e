package kv

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestRotationIsOrthogonal(t *testing.T) {
	for _, d := range []int{8, 64, 128, 256} {
		r, err := NewRotation(d)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(d)))
		a, b := make([]float32, d), make([]float32, d)
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		ra, rb := make([]float32, d), make([]float32, d)
		r.Apply(ra, a)
		r.Apply(rb, b)
		var dot, rdot, na, nra float64
		for i := range a {
			dot += float64(a[i]) * float64(b[i])
			rdot += float64(ra[i]) * float64(rb[i])
			na += float64(a[i]) * float64(a[i])
			nra += float64(ra[i]) * float64(ra[i])
		}
		if math.Abs(dot-rdot) > 1e-4*math.Sqrt(na*nra) || math.Abs(na-nra) > 1e-4*na {
			t.Fatalf("d %d: dot %g -> %g, norm² %g -> %g", d, dot, rdot, na, nra)
		}
		// In place gives the same, and the transform is fixed for a d.
		r2, _ := NewRotation(d)
		r2.Apply(a, a)
		for i := range a {
			if a[i] != ra[i] {
				t.Fatalf("d %d: in-place or second rotation differs at %d", d, i)
			}
		}
	}
	if _, err := NewRotation(96); err == nil {
		t.Fatal("head dim 96 accepted")
	}
	if err := (Config{Type: Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 96, Ctx: 8, Rotate: true}).Validate(); err == nil {
		t.Fatal("config with rotation and head dim 96 accepted")
	}
}
