package kv

import (
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
)

func TestQ4NibbleOrder(t *testing.T) {
	// A ramp 0..15 twice quantizes to scale 1, bias 0 and codes equal to
	// the values, so the layout is visible in the words.
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i % 16)
	}
	codes := make([]uint32, 4)
	meta := make([]uint16, 2)
	QuantizeGroupQ4(codes, meta, x, 32)
	if half.ToFloat32(meta[0]) != 1 || half.ToFloat32(meta[1]) != 0 {
		t.Fatalf("scale, bias = %v, %v; want 1, 0", half.ToFloat32(meta[0]), half.ToFloat32(meta[1]))
	}
	want := []uint32{0x76543210, 0xfedcba98, 0x76543210, 0xfedcba98}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("word %d = %#x, want %#x (element i at bits 4*(i%%8) of word i/8)", i, codes[i], want[i])
		}
	}
}

func randomGroups(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * float32(1+i%7)
	}
	x[5] = 100 // an outlier stretches its group's step
	return x
}

func TestQuantizeRoundTripWithinHalfStep(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, gs := range []int{32, 64} {
		x := randomGroups(r, 256)
		ng := len(x) / gs
		q4, q8 := make([]uint32, len(x)/8), make([]uint8, len(x))
		m4, m8 := make([]uint16, 2*ng), make([]uint16, 2*ng)
		QuantizeGroupQ4(q4, m4, x, gs)
		QuantizeGroupQ8(q8, m8, x, gs)
		y4, y8 := make([]float32, len(x)), make([]float32, len(x))
		DequantizeGroupQ4(y4, q4, m4, gs)
		DequantizeGroupQ8(y8, q8, m8, gs)
		for i := range x {
			g := i / gs
			for _, c := range []struct {
				name string
				y    float32
				meta []uint16
			}{{"q4", y4[i], m4}, {"q8", y8[i], m8}} {
				scale := half.ToFloat32(c.meta[2*g])
				// Half a step, plus float32 rounding of the arithmetic.
				if err := math.Abs(float64(c.y - x[i])); err > float64(scale)/2*(1+1e-5)+1e-6 {
					t.Fatalf("gs %d %s element %d: %v -> %v, error %g > scale/2 = %g", gs, c.name, i, x[i], c.y, err, scale/2)
				}
			}
		}
	}
}

func TestQuantizeConstantAndExtremeGroups(t *testing.T) {
	for _, v := range []float32{0, 1.5, -3e4, 7e5, float32(math.Inf(1))} {
		x := make([]float32, 32)
		for i := range x {
			x[i] = v
		}
		codes := make([]uint32, 4)
		meta := make([]uint16, 2)
		QuantizeGroupQ4(codes, meta, x, 32)
		y := make([]float32, 32)
		DequantizeGroupQ4(y, codes, meta, 32)
		scale := half.ToFloat32(meta[0])
		if !(scale > 0) || math.IsInf(float64(scale), 0) || math.IsInf(float64(half.ToFloat32(meta[1])), 0) {
			t.Fatalf("constant %v: scale %v bias %v must be finite, scale positive", v, scale, half.ToFloat32(meta[1]))
		}
		want := min(max(v, -maxHalf), maxHalf) // saturated to the fp16 range
		if d := math.Abs(float64(y[0] - want)); d > float64(scale)/2+math.Abs(float64(want))/1024 {
			t.Fatalf("constant %v: got %v", v, y[0])
		}
	}
}
