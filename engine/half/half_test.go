package half

import (
	"math"
	"testing"
)

func TestRoundTripAllHalves(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := ToFloat32(h)
		if f != f { // NaN: only check it stays NaN
			if g := ToFloat32(FromFloat32(f)); g == g {
				t.Fatalf("NaN %#04x lost", h)
			}
			continue
		}
		if back := FromFloat32(f); back != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestRoundingTiesToEven(t *testing.T) {
	cases := []struct {
		in   float32
		want float32
	}{
		{1 + 1.0/2048, 1},                              // halfway between 1 and next: even is 1
		{1 + 3.0/2048, 1 + 4.0/2048},                   // halfway, odd below: rounds up
		{65519, 65504},                                 // below overflow threshold
		{65520, float32(math.Inf(1))},                  // overflow
		{5.960464477539063e-08, 5.960464477539063e-08}, // smallest subnormal
		{2.9802322387695312e-08, 0},                    // exactly half of it: ties to even (0)
		{float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))},
	}
	for _, c := range cases {
		if got := Round(c.in); got != c.want {
			t.Errorf("Round(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	if got := BF16ToFloat32(BF16FromFloat32(1.5)); got != 1.5 {
		t.Fatalf("bf16 1.5 -> %g", got)
	}
	if got := BF16ToFloat32(BF16FromFloat32(1 + 1.0/256)); got != 1 {
		t.Fatalf("bf16 tie -> %g, want 1", got)
	}
}
