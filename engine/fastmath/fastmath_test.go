package fastmath

import (
	"math"
	"testing"
)

func TestExp2Accuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-125); x <= 127; x += 0.001 {
		want := math.Exp2(float64(x))
		got := float64(Exp2(x))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 3e-7 {
		t.Fatalf("worst relative error %g", worst)
	}
	for _, x := range []float32{float32(math.Inf(-1)), -126, -1000, float32(math.NaN())} {
		if Exp2(x) != 0 {
			t.Fatalf("Exp2(%v) = %v, want 0", x, Exp2(x))
		}
	}
}

func TestSiLU(t *testing.T) {
	for _, x := range []float32{-100, -20, -3, -0.5, 0, 0.25, 1, 4, 30, 100} {
		want := float64(x) / (1 + math.Exp(-float64(x)))
		got := float64(SiLU(x))
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("SiLU(%g) = %g, want %g", x, got, want)
		}
	}
}
