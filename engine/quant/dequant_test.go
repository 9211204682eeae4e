package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
)

// checkAgainstRef compares got with the float64 reference, allowing float32
// rounding relative to the largest magnitude in each block.
func checkAgainstRef(t *testing.T, typ ggml.Type, got []float32, want []float64) {
	t.Helper()
	bs := typ.BlockSize()
	if bs == 1 {
		bs = 32
	}
	for b := 0; b < len(want); b += bs {
		var big float64
		for _, v := range want[b : b+bs] {
			big = max(big, math.Abs(v))
		}
		for j := b; j < b+bs; j++ {
			if d := math.Abs(float64(got[j]) - want[j]); d > 1e-6*big || math.IsNaN(float64(got[j])) {
				t.Fatalf("%s element %d: got %g, want %g", typ, j, got[j], want[j])
			}
		}
	}
}

func TestDequantizeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, typ := range testWeightTypes {
		for _, mag := range []float64{1e-3, 1, 3000} { // 3000 pushes fp16 scales near their top
			n := 4 * 256
			src := ggmltest.RandomWeights(rng, typ, 1, n, mag)
			got := make([]float32, n)
			if err := Dequantize(typ, got, src); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			checkAgainstRef(t, typ, got, refDequant(typ, src, n))
		}
	}
}

// Every quant bit pattern at zero and at all-ones, with zero, tiny
// (subnormal) and large scales.
func TestDequantizeEdgeBlocks(t *testing.T) {
	for _, typ := range testWeightTypes {
		if typ.BlockSize() == 1 || typ == ggml.MXFP4 { // MXFP4: TestMXFP4DecodesEveryScaleAndCode
			continue
		}
		for _, fill := range []byte{0x00, 0xFF, 0x55} {
			for _, scale := range []uint16{0x0000, 0x0001, 0x7BFF, 0xFBFF} { // 0, min subnormal, ±65504
				src := make([]byte, typ.TypeSize()*2)
				for i := range src {
					src[i] = fill
				}
				for blk := 0; blk < 2; blk++ {
					for _, off := range ggmltest.ScaleOffsets[typ] {
						src[blk*typ.TypeSize()+off] = byte(scale)
						src[blk*typ.TypeSize()+off+1] = byte(scale >> 8)
					}
				}
				got := make([]float32, 2*typ.BlockSize())
				if err := Dequantize(typ, got, src); err != nil {
					t.Fatal(err)
				}
				checkAgainstRef(t, typ, got, refDequant(typ, src, len(got)))
			}
		}
	}
}

func TestDequantizeRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range testWeightTypes {
		rows, cols := 5, 512
		data := ggmltest.RandomWeights(rng, typ, rows, cols, 1)
		m := Matrix{Type: typ, Rows: rows, Cols: cols, Data: data}
		all := make([]float32, rows*cols)
		if err := Dequantize(typ, all, data); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, cols)
		for r := 0; r < rows; r++ {
			if err := DequantizeRow(m, r, row); err != nil {
				t.Fatal(err)
			}
			for j := range row {
				if row[j] != all[r*cols+j] && !(row[j] != row[j] && all[r*cols+j] != all[r*cols+j]) {
					t.Fatalf("%s row %d col %d: %g vs %g", typ, r, j, row[j], all[r*cols+j])
				}
			}
		}
		if err := DequantizeRow(m, rows, row); err == nil {
			t.Errorf("%s: row %d of %d accepted", typ, rows, rows)
		}
		if err := DequantizeRow(m, 0, row[:cols-1]); err == nil {
			t.Errorf("%s: short destination accepted", typ)
		}
	}
}

func TestDequantizeRejectsBadInput(t *testing.T) {
	cases := []struct {
		name string
		typ  ggml.Type
		n    int
		src  int
		want string
	}{
		{"partial block", ggml.Q4_0, 33, 36, "multiple of the block size"},
		{"short source", ggml.Q4_0, 64, 35, "need 36 bytes"},
		{"long source", ggml.Q6_K, 256, 211, "need 210 bytes"},
		{"unsupported", ggml.IQ2_XXS, 256, 66, "unsupported"},
		{"unknown", ggml.Type(99), 32, 32, "unsupported"},
	}
	for _, c := range cases {
		err := Dequantize(c.typ, make([]float32, c.n), make([]byte, c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if Supported(ggml.IQ4_NL) || Supported(ggml.Q8_K) || !Supported(ggml.Q3_K) {
		t.Error("Supported disagrees with the kernel table")
	}
}
