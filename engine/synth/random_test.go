package synth

import (
	"math"
	"testing"
)

// The ziggurat draws a standard normal: moments and tail masses match.
func TestNormalGen(t *testing.T) {
	const n = 2_000_000
	row := make([]float32, n)
	fillRow(row, 99, 0, dist{0, 1})
	// fillRow inlines the fast path of next: both give the same stream.
	g := normalGen{state: splitmix64(99 ^ splitmix64(0))}
	for i := 0; i < 1000; i++ {
		if x := float32(g.next()); x != row[i] {
			t.Fatalf("sample %d: fillRow %g, next %g", i, row[i], x)
		}
	}
	var s1, s2, s4 float64
	var in1, tail3 int
	for _, v := range row {
		x := float64(v)
		s1 += x
		s2 += x * x
		s4 += x * x * x * x
		if math.Abs(x) < 1 {
			in1++
		}
		if math.Abs(x) > zigR {
			tail3++
		}
	}
	mean, variance, kurt := s1/n, s2/n, s4/n
	p1 := float64(in1) / n
	pTail := float64(tail3) / n
	wantTail := math.Erfc(zigR / math.Sqrt2) // 5.76e-4
	t.Logf("mean %.5f var %.5f kurtosis %.4f P(|x|<1) %.5f P(|x|>r) %.2e (want %.2e)", mean, variance, kurt, p1, pTail, wantTail)
	if math.Abs(mean) > 0.004 || math.Abs(variance-1) > 0.005 || math.Abs(kurt-3) > 0.03 {
		t.Errorf("moments off: mean %g var %g kurtosis %g", mean, variance, kurt)
	}
	if math.Abs(p1-math.Erf(1/math.Sqrt2)) > 0.002 {
		t.Errorf("P(|x|<1) = %g, want 0.6827", p1)
	}
	if math.Abs(pTail-wantTail) > 0.15*wantTail {
		t.Errorf("tail mass %g, want %g", pTail, wantTail)
	}
}
