package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/parallel"
)

// specE2M1 decodes a 4-bit E2M1 code as the OCP Microscaling spec defines
// it: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0; exponent 0 is
// subnormal (0.5·m).
func specE2M1(code byte) float64 {
	sign := 1.0
	if code&8 != 0 {
		sign = -1
	}
	exp, man := int(code>>1&3), float64(code&1)
	if exp == 0 {
		return sign * 0.5 * man
	}
	return sign * math.Ldexp(1+man/2, exp-1)
}

// specE8M0 is the spec's scale 2^(e−127); 0xFF, NaN in the spec, is taken
// as ggml takes it (2^128).
func specE8M0(e byte) float64 { return math.Ldexp(1, int(e)-127) }

// refMXFP4 decodes one block from ggml's block_mxfp4 layout: the scale
// byte, then element i < 16 in the low nibble of code byte i and element
// i+16 in its high nibble.
func refMXFP4(x []byte) []float64 {
	y := make([]float64, 32)
	for i := range y {
		code := x[1+i%16] & 15
		if i >= 16 {
			code = x[1+i%16] >> 4
		}
		y[i] = specE2M1(code) * specE8M0(x[0])
	}
	return y
}

// Every scale byte with every code at every element position decodes to
// the spec's value, exactly (every product is a float32, or overflows to
// ±Inf in both).
func TestMXFP4DecodesEveryScaleAndCode(t *testing.T) {
	blk := make([]byte, 17)
	got := make([]float32, 32)
	for e := 0; e < 256; e++ {
		for shift := 0; shift < 16; shift++ {
			blk[0] = byte(e)
			for j := 0; j < 16; j++ { // element i gets code (i+shift)%16
				blk[1+j] = byte((j+shift)%16) | byte((j+16+shift)%16)<<4
			}
			if err := Dequantize(ggml.MXFP4, got, blk); err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				code := byte((i + shift) % 16)
				want := float32(specE2M1(code) * specE8M0(byte(e)))
				if math.Float32bits(g) != math.Float32bits(want) && !(g == 0 && want == 0) {
					t.Fatalf("scale 0x%02x, code %d at element %d: got %g, want %g", e, code, i, g, want)
				}
			}
		}
	}
}

// The layout, spelled out once: one block of codes 0..15 in the low nibbles
// and 15..0 in the high ones, scale 2^0.
func TestMXFP4BlockLayout(t *testing.T) {
	blk := []byte{127, 0xF0, 0xE1, 0xD2, 0xC3, 0xB4, 0xA5, 0x96, 0x87, 0x78, 0x69, 0x5A, 0x4B, 0x3C, 0x2D, 0x1E, 0x0F}
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6,
		-6, -4, -3, -2, -1.5, -1, -0.5, -0, 6, 4, 3, 2, 1.5, 1, 0.5, 0}
	got := make([]float32, 32)
	if err := Dequantize(ggml.MXFP4, got, blk); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: got %g, want %g (all: %v)", i, got[i], want[i], got)
		}
	}
}

// refQuantMXFP4 transcribes ggml's quantize_row_mxfp4_ref: e = floor(log2f
// (amax)) − 2 + 127, then per element the first code of least |v·d − x|
// in kvalues order, with d = 2^(e−128) and v the doubled E2M1 value.
func refQuantMXFP4(x []float32) []byte {
	out := make([]byte, 0, len(x)/32*17)
	for b := 0; b < len(x)/32; b++ {
		xb := x[b*32 : b*32+32]
		amax := 0.0
		for _, v := range xb {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		e := 0
		if amax > 0 {
			e = int(math.Floor(float64(float32(math.Log2(amax))))) - 2 + 127
		}
		d := math.Ldexp(1, e-128)
		idx := func(v float32) byte {
			best, bestErr := 0, math.Inf(1)
			for c := 0; c < 16; c++ {
				err := math.Abs(float64(float32(2*specE2M1(byte(c))*d)) - float64(v))
				if float32(err) < float32(bestErr) {
					best, bestErr = c, err
				}
			}
			return byte(best)
		}
		blk := [17]byte{byte(e)}
		for j := 0; j < 16; j++ {
			blk[1+j] = idx(xb[j]) | idx(xb[j+16])<<4
		}
		out = append(out, blk[:]...)
	}
	return out
}

func mxfp4Inputs(rng *rand.Rand) [][]float32 {
	ins := quantizeInputs(rng)
	// Exact midpoints between codes (ties go to the lower code), powers of
	// two as amax, and values just below them.
	mid := make([]float32, 64)
	for i := range mid {
		mid[i] = float32(i%16)*0.25 - 2
	}
	mid[0], mid[40] = 6, -4
	pow := make([]float32, 32)
	for i := range pow {
		pow[i] = float32(math.Ldexp(1, i-16))
	}
	below := make([]float32, 32)
	for i := range below {
		below[i] = math.Nextafter32(float32(math.Ldexp(1, i%8-3)), 0) * float32(1-2*(i%2))
	}
	return append(ins, mid, pow, below)
}

func TestQuantizeMXFP4MatchesGGMLReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for n, x := range mxfp4Inputs(rng) {
		got := make([]byte, ggml.MXFP4.RowBytes(len(x)))
		if err := Quantize(ggml.MXFP4, got, x); err != nil {
			t.Fatal(err)
		}
		want := refQuantMXFP4(x)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("input %d: byte %d: got 0x%02x, want 0x%02x", n, i, got[i], want[i])
			}
		}
	}
}

// Hand-worked block: amax 8 gives scale byte 128 (unit steps of kvalues);
// 7.5 rounds to 8 (code 6), 5 ties between 4 and 6 and takes 4 (code 4),
// −8 is code 14, −0.25 rounds to −0 → code 0 (the first of the two zeros).
func TestQuantizeMXFP4Golden(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3], x[16] = 7.5, 5, -8, -0.25, 12
	got := make([]byte, 17)
	if err := Quantize(ggml.MXFP4, got, x); err != nil {
		t.Fatal(err)
	}
	// amax 12: floor(log2 12) = 3, e = 128, d = 1: 12 → code 7.
	want := []byte{128, 6 | 7<<4, 4, 14, 0}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("byte %d: got 0x%02x, want 0x%02x (block % x)", i, got[i], w, got)
		}
	}
}

// Quantize then dequantize: every element lands on the representable value
// nearest to it, and within half the largest step of the block.
func TestQuantizeMXFP4RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, x := range mxfp4Inputs(rng) {
		q := make([]byte, ggml.MXFP4.RowBytes(len(x)))
		if err := Quantize(ggml.MXFP4, q, x); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(x))
		if err := Dequantize(ggml.MXFP4, y, q); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			d := specE8M0(q[i/32*17])
			best := math.Inf(1)
			for c := byte(0); c < 16; c++ {
				best = math.Min(best, math.Abs(specE2M1(c)*d-float64(x[i])))
			}
			if e := math.Abs(float64(y[i]) - float64(x[i])); e > best*(1+1e-6)+1e-45 {
				t.Fatalf("element %d: %g → %g, error %g, the nearest code is %g away", i, x[i], y[i], e, best)
			}
		}
	}
}

// Paired with Q8_0 activations (SetMXFP4Q8Activations), as ggml's
// ggml_vec_dot_mxfp4_q8_0: the portable kernel equals a float64 dot of the
// dequantized weights with Q8_0-rounded activations to float32 rounding, the
// SIMD kernel equals the portable one, and against the float activations
// the error is the 8-bit rounding.
func TestMXFP4WithQ8Activations(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	pool := parallel.NewPool(2)
	defer pool.Close()
	portable, active := kernelsPortable, kernelsActive
	portable[ggml.MXFP4] = kernel{act: actQ8_0, dot1: dotMXFP4}
	active[ggml.MXFP4] = mxfp4Q8
	for _, c := range testCases(rng, ggml.MXFP4) {
		got, simd := run(t, &c, &portable, pool), run(t, &c, &active, pool)
		w := deqRows(&c)
		for i := 0; i < c.n; i++ {
			xrow := c.x[i*c.cols : (i+1)*c.cols]
			x := emulateActivations(ggml.Q8_0, xrow)
			for r := 0; r < c.rows; r++ {
				want := dot64(w[r], x)
				tol := 2e-6*absDot(w[r], x) + 1e-30
				if g := float64(got[i*c.rows+r]); math.Abs(g-want) > tol {
					t.Fatalf("%s: row %d x %d: portable %g, want %g (tol %.3g)", c.name(), r, i, g, want, tol)
				}
				if s := float64(simd[i*c.rows+r]); math.Abs(s-want) > tol {
					t.Fatalf("%s: row %d x %d: simd %g, want %g (tol %.3g)", c.name(), r, i, s, want, tol)
				}
			}
		}
	}
	SetMXFP4Q8Activations(true)
	if kernelsActive[ggml.MXFP4].act != actQ8_0 {
		t.Fatal("SetMXFP4Q8Activations(true) left the float kernel in use")
	}
	SetMXFP4Q8Activations(false)
	if kernelsActive[ggml.MXFP4].act != actF32 {
		t.Fatal("SetMXFP4Q8Activations(false) left the Q8_0 kernel in use")
	}
}
