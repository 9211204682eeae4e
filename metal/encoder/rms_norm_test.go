//go:build linux

package encoder

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/metal/internal/emulator"
)

// opsHalfVector is opsVector with an F16 weight (x rounded through fp16).
func opsHalfVector(t *testing.T, dev *emulator.Device, b *cpu.Backend, x []float32, off int) (backend.Weight, *Weight) {
	t.Helper()
	data := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(data[2*i:], half.FromFloat32(v))
	}
	m, err := b.MapWeights(data, []backend.WeightDesc{{Name: "v", Type: ggml.F16, Rows: 1, Cols: len(x)}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Weights()[0], &Weight{Region: devBytes(t, dev, data, off), Type: ggml.F16, Rows: 1, Cols: len(x)}
}

// RMSNorm on the emulator against the CPU backend's, F32 and F16 weights,
// in place too. Tolerance: 2e-6 of the row's largest output (the kernel
// sums squares in float32, in simd order; the CPU in float64).
func TestEncoderRMSNorm(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(73, 74))
	for i, c := range []struct{ n, rows int }{{896, 3}, {2048, 1}, {4096, 2}, {64, 5}, {8192, 1}, {1536, 2}} {
		x := randomFloats(r, c.n*c.rows, 2)
		w := make([]float32, c.n)
		for i := range w {
			w[i] = float32(1 + 0.3*r.NormFloat64())
		}
		const eps = 1e-6
		vector, f16 := opsVector, i%2 == 1
		if f16 {
			vector = opsHalfVector
		}
		cw, gw := vector(t, dev, cb, w, 32)
		want := cpuTensor(cb, make([]float32, len(x)))
		cb.RMSNorm(want, cpuTensor(cb, x), cw, eps, c.rows)
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("n%d_rows%d_f16%v_%v", c.n, c.rows, f16, o), func(t *testing.T) {
				src, dst := devFloats(t, dev, x, 0), devFloats(t, dev, make([]float32, len(x)), 16)
				if c.rows == 2 {
					dst = src // in place, as the forward pass runs the last row
				}
				e.RMSNorm(dst, src, gw, eps, c.rows)
				runEncoded(t, dev, e, o)
				got := readFloats(dst)
				for row := 0; row < c.rows; row++ {
					exp := want.D[row*c.n : (row+1)*c.n]
					var scale float64
					for _, v := range exp {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i, v := range got[row*c.n : (row+1)*c.n] {
						if d := math.Abs(float64(v - exp[i])); !(d <= 2e-6*scale) {
							t.Fatalf("row %d element %d: %v, want %v", row, i, v, exp[i])
						}
					}
				}
			})
		}
	}
}
