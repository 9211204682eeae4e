package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/half"
)

// Test-side transcriptions of ggml's quantize_row_q8_0_ref and
// quantize_row_q4_0_ref, one block at a time.
func refQuantQ8_0(x []float32) []byte {
	var out []byte
	for b := 0; b < len(x); b += 32 {
		amax := float32(0)
		for _, v := range x[b : b+32] {
			amax = float32(math.Max(float64(amax), math.Abs(float64(v))))
		}
		d := amax / float32((1<<7)-1)
		id := float32(0)
		if d != 0 {
			id = 1.0 / d
		}
		out = binary.LittleEndian.AppendUint16(out, half.FromFloat32(d))
		for _, v := range x[b : b+32] {
			x0 := v * id
			out = append(out, byte(int8(math.Round(float64(x0))))) // roundf
		}
	}
	return out
}

func refQuantQ4_0(x []float32) []byte {
	var out []byte
	for b := 0; b < len(x); b += 32 {
		amax, mx := float32(0), float32(0)
		for _, v := range x[b : b+32] {
			if amax < float32(math.Abs(float64(v))) {
				amax, mx = float32(math.Abs(float64(v))), v
			}
		}
		d := mx / -8
		id := float32(0)
		if d != 0 {
			id = 1.0 / d
		}
		out = binary.LittleEndian.AppendUint16(out, half.FromFloat32(d))
		for j := 0; j < 16; j++ {
			x0 := x[b+j] * id
			x1 := x[b+16+j] * id
			xi0 := min(15, int8(x0+8.5))
			xi1 := min(15, int8(x1+8.5))
			out = append(out, byte(xi0)|byte(xi1)<<4)
		}
	}
	return out
}

func quantizeInputs(rng *rand.Rand) [][]float32 {
	gauss := randomVector(rng, 1024, 1)
	wide := make([]float32, 1024)
	for i := range wide {
		wide[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4)))
	}
	zeros := make([]float32, 64)
	ties := make([]float32, 64) // x/d lands on .5 exactly: rounding direction matters
	for i := range ties {
		ties[i] = float32(i%32) - 15.5
	}
	ties[31] = 127 // d = 1 for q8_0
	big := make([]float32, 64)
	for i := range big {
		big[i] = float32(60000 - 1000*i)
	}
	oneHot := make([]float32, 64)
	oneHot[5], oneHot[40] = -3, 1e-30
	return [][]float32{gauss, wide, zeros, ties, big, oneHot}
}

func TestQuantizeMatchesGGMLReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for k, x := range quantizeInputs(rng) {
		for _, c := range []struct {
			typ ggml.Type
			ref func([]float32) []byte
		}{{ggml.Q8_0, refQuantQ8_0}, {ggml.Q4_0, refQuantQ4_0}} {
			got := make([]byte, c.typ.RowBytes(len(x)))
			if err := Quantize(c.typ, got, x); err != nil {
				t.Fatal(err)
			}
			if want := c.ref(x); !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Fatalf("input %d %s: byte %d = %#02x, want %#02x", k, c.typ, i, got[i], want[i])
			}
		}
	}
}

// A hand-checked block: x_j = j-16, so max = -16, d = 2, q_j = round-up(j/2)
// capped at 15.
func TestQuantizeQ4_0Golden(t *testing.T) {
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j - 16)
	}
	got := make([]byte, 18)
	if err := Quantize(ggml.Q4_0, got, x); err != nil {
		t.Fatal(err)
	}
	q := func(j int) byte { return byte(min(15, (j+1)/2)) }
	want := []byte{0x00, 0x40} // fp16 2.0
	for j := 0; j < 16; j++ {
		want = append(want, q(j)|q(j+16)<<4)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
}

func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomVector(rng, 4096, 2)
	for _, c := range []struct {
		typ ggml.Type
		tol float64 // worst error over the block's absolute max
	}{
		{ggml.F32, 0}, {ggml.F16, 1.0 / 2048}, {ggml.BF16, 1.0 / 256},
		{ggml.Q8_0, 0.5/127 + 1.0/2048},
		{ggml.Q4_0, 1.0/8 + 1.0/512}, // the value opposite the max clamps from 8 to 7
	} {
		buf := make([]byte, c.typ.RowBytes(len(x)))
		if err := Quantize(c.typ, buf, x); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(x))
		if err := Dequantize(c.typ, y, buf); err != nil {
			t.Fatal(err)
		}
		var worst float64
		for b := 0; b < len(x); b += 32 {
			var amax float64
			for _, v := range x[b : b+32] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for j := b; j < b+32; j++ {
				e := math.Abs(float64(y[j]-x[j])) / amax
				if c.typ == ggml.F16 || c.typ == ggml.BF16 {
					e = math.Abs(float64(y[j]-x[j])) / math.Abs(float64(x[j]))
				}
				worst = math.Max(worst, e)
			}
		}
		if worst > c.tol {
			t.Errorf("%s: worst relative error %.3g > %.3g", c.typ, worst, c.tol)
		}
	}
}

func TestQuantizeRejects(t *testing.T) {
	if err := Quantize(ggml.Q4_K, make([]byte, 144), make([]float32, 256)); err == nil {
		t.Error("Q4_K quantize accepted")
	}
	if err := Quantize(ggml.Q8_0, make([]byte, 33), make([]float32, 32)); err == nil {
		t.Error("short destination accepted")
	}
	if err := Quantize(ggml.Q4_0, make([]byte, 18), make([]float32, 31)); err == nil {
		t.Error("partial block accepted")
	}
}
