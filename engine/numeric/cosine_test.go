package numeric

import (
	"math"
	"testing"
)

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		a    []float32
		b    []float64
		want float64
	}{
		{[]float32{1, 2, 3}, []float64{1, 2, 3}, 1},
		{[]float32{1, 0}, []float64{0, 1}, 0},
		{[]float32{1, 2}, []float64{-1, -2}, -1},
		{[]float32{3, 4}, []float64{4, 3}, 24.0 / 25},
	} {
		if got := Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %g, want %g", tc.a, tc.b, got, tc.want)
		}
	}
	if got := Cosine([]float32{0, 0}, []float32{1, 1}); !math.IsNaN(got) {
		t.Errorf("Cosine of a zero vector = %g, want NaN", got)
	}
}
