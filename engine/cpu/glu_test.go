package cpu

import (
	"math"
	"testing"

	"nibble/engine/backend"
)

// The newer families' ops against float64: GELU-tanh GLU (to a few ulp of
// the fast exp), the scale, the soft-cap; per-head RMSNorm (rows of the
// weight's width); RoPE's attention factor on cos and sin.
func TestFamilyOps(t *testing.T) {
	b := New(2)
	defer b.Close()
	const n = 10000
	gate, up, dst := b.Alloc(n).(*Tensor), b.Alloc(n).(*Tensor), b.Alloc(n).(*Tensor)
	for i := range n {
		gate.D[i] = float32(i-n/2) / 400 // [-12.5, 12.5)
		up.D[i] = 1 + float32(i%7)/7
	}
	b.GeluGLU(dst, gate, up, n)
	for i := range n {
		x := float64(gate.D[i])
		want := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * float64(up.D[i])
		if d := math.Abs(float64(dst.D[i]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("gelu_glu(%g)·%g = %g, want %g", x, up.D[i], dst.D[i], want)
		}
	}
	b.Scale(up, 16, n)
	b.Softcap(gate, 5, n)
	for i := range n {
		x := float64(i-n/2) / 400
		if want := 5 * math.Tanh(float64(float32(x))/5); math.Abs(float64(gate.D[i])-want) > 1e-6 {
			t.Fatalf("softcap(%g) = %g, want %g", x, gate.D[i], want)
		}
		if want := 16 * (1 + float32(i%7)/7); up.D[i] != want {
			t.Fatalf("scale: %g, want %g", up.D[i], want)
		}
	}

	// Per-head norm: 3 rows of 2 heads of 4, each head normed alone.
	x, out := b.Alloc(24).(*Tensor), b.Alloc(24).(*Tensor)
	for i := range x.D {
		x.D[i] = float32(i%5) - 1.5
	}
	w := []float32{1, 2, 0.5, 1}
	b.RMSNorm(out, x, f32Weight(t, b, w), 1e-6, 6)
	for h := range 6 {
		row := x.D[4*h : 4*h+4]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/4+1e-6)
		for e, v := range row {
			if want := float64(v) * inv * float64(w[e]); math.Abs(float64(out.D[4*h+e])-want) > 1e-5 {
				t.Fatalf("head %d element %d: %g, want %g", h, e, out.D[4*h+e], want)
			}
		}
	}

	// RoPE's attention factor multiplies the rotated pair.
	plain, scaled := b.Alloc(8).(*Tensor), b.Alloc(8).(*Tensor)
	for i := range 8 {
		plain.D[i], scaled.D[i] = float32(i+1), float32(i+1)
	}
	r := backend.RoPE{Neox: true, Dims: 8, Base: 10000}
	b.RoPE(plain, 1, 8, 1, []int32{7}, &r)
	r.AttnFactor = 1.25
	b.RoPE(scaled, 1, 8, 1, []int32{7}, &r)
	for i := range 8 {
		if want := 1.25 * float64(plain.D[i]); math.Abs(float64(scaled.D[i])-want) > 1e-5 {
			t.Fatalf("rope with attention factor 1.25: element %d is %g, want %g", i, scaled.D[i], want)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}
