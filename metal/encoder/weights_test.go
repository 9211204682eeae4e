//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/backend/backendtest"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/metal/device"
	"nibble/metal/internal/emulator"
)

// deviceWeight puts data into a device buffer at a 32-byte offset (as in
// a GGUF mapping) and describes it.
func deviceWeight(t *testing.T, dev device.Device, typ ggml.Type, rows, cols int, data []byte) *Weight {
	t.Helper()
	const lead = 32
	buf, err := dev.NewBuffer(lead + len(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Release)
	copy(buf.Bytes()[lead:], data)
	return &Weight{Region: Region{Buf: buf, Off: lead, Len: len(data)}, Type: typ, Rows: rows, Cols: cols}
}

// cpuWeights maps tensors on the CPU backend (each at a 32-byte offset).
func cpuWeights(t *testing.T, b *cpu.Backend, ds []backend.WeightDesc, data [][]byte) []backend.Weight {
	t.Helper()
	m, err := b.MapWeights(backendtest.Layout(ds, data, 32), ds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.Weights()
}

// Embed and mulMV of every weight type against the CPU backend's Embed
// and MatMul. Embed is exact. MatMul on the CPU rounds x to q8 (or to
// fp16/bf16 for those weights) first, so the tolerance is the conformance
// suite's for that rounding: c·‖w‖₂·‖x‖∞ + 6e-4·Σ|wx| for quantized weights
// (c = 1.4e-2), c·‖w∘x‖₂ for float ones (F16 2e-3, BF16 1.4e-2, F32 0),
// plus 1e-5·Σ|wx| for the summation order.
func TestEncodeWeights(t *testing.T) {
	dev, e := emuEncoder(t)
	ref := cpu.New(1)
	defer ref.Close()
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range ggmltest.WeightTypes {
		for _, cols := range []int{256, 512} {
			const vocab, outRows = 19, 37
			table := ggmltest.RandomWeights(r, typ, vocab, cols, 0.5)
			wData := ggmltest.RandomWeights(r, typ, outRows, cols, 0.5)
			xs := make([]float32, 5*cols)
			for i := range xs {
				xs[i] = float32(r.NormFloat64())
			}
			ws := cpuWeights(t, ref, []backend.WeightDesc{
				{Name: "table", Type: typ, Rows: vocab, Cols: cols},
				{Name: "w", Type: typ, Rows: outRows, Cols: cols},
				{Name: "x", Type: ggml.F32, Rows: 5, Cols: cols},
			}, [][]byte{table, wData, f32Bytes(xs)})

			t.Run(fmt.Sprintf("embed_%v_%d", typ, cols), func(t *testing.T) {
				tokens := []int32{vocab - 1, 0, 7, 7, 3}
				want := ref.Alloc(len(tokens) * cols)
				ref.Embed(want, ws[0], tokens)
				wantF := make([]float32, len(tokens)*cols)
				ref.Read(wantF, want, 0)
				dst := devFloats(t, dev, make([]float32, len(tokens)*cols), 0)
				e.Embed(dst, deviceWeight(t, dev, typ, vocab, cols, table), tokens)
				runEncoded(t, dev, e, emulator.Forward)
				for i, v := range readFloats(dst)[:len(wantF)] {
					if v != wantF[i] {
						t.Fatalf("row %d element %d: %v, want %v", i/cols, i%cols, v, wantF[i])
					}
				}
			})
			t.Run(fmt.Sprintf("mul_mv_%v_%d", typ, cols), func(t *testing.T) {
				w := deviceWeight(t, dev, typ, outRows, cols, wData)
				wf := make([]float32, outRows*cols)
				wt := ref.Alloc(outRows * cols)
				ref.Embed(wt, ws[1], seq(outRows))
				ref.Read(wf, wt, 0)
				for _, rows := range []int{1, 3, 5} {
					x := ref.Alloc(rows * cols)
					ref.Embed(x, ws[2], seq(rows))
					want := ref.Alloc(rows * outRows)
					ref.MatMul(want, ws[1], x, rows)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					wantF := make([]float32, rows*outRows)
					ref.Read(wantF, want, 0)
					dst := devFloats(t, dev, make([]float32, rows*outRows), 0)
					e.mulMV(dst, w, devFloats(t, dev, xs[:rows*cols], 0), rows)
					runEncoded(t, dev, e, emulator.Forward)
					got := readFloats(dst)
					for y := 0; y < rows; y++ {
						xr := xs[y*cols : (y+1)*cols]
						var xInf float64
						for _, v := range xr {
							xInf = math.Max(xInf, math.Abs(float64(v)))
						}
						for i := 0; i < outRows; i++ {
							var sumAbs, wx2, w2 float64
							for j, wij := range wf[i*cols : (i+1)*cols] {
								p := float64(wij) * float64(xr[j])
								sumAbs += math.Abs(p)
								wx2 += p * p
								w2 += float64(wij) * float64(wij)
							}
							tol := 1e-5*sumAbs + 1e-30
							switch typ {
							case ggml.F32:
							case ggml.F16:
								tol += 2e-3 * math.Sqrt(wx2)
							case ggml.BF16:
								tol += 1.4e-2 * math.Sqrt(wx2)
							default:
								tol += 1.4e-2*math.Sqrt(w2)*xInf + 6e-4*sumAbs
							}
							k := y*outRows + i
							if d := math.Abs(float64(got[k]) - float64(wantF[k])); !(d <= tol) {
								t.Fatalf("rows %d: x row %d output %d: %v, CPU %v (|Δ| %.3g > %.3g)", rows, y, i, got[k], wantF[k], d, tol)
							}
						}
					}
				}
			})
		}
	}
}

// Arguments that break the ops' contracts are encoding errors, not
// dispatches.
func TestEncodeWeightsErrors(t *testing.T) {
	dev, e := emuEncoder(t)
	data := make([]byte, ggml.Q8_0.RowBytes(64)*4)
	w := deviceWeight(t, dev, ggml.Q8_0, 4, 64, data)
	dst := devFloats(t, dev, make([]float32, 4*64), 0)
	for _, c := range []struct {
		what, want string
		op         func()
	}{
		{"token past the table", "token 4", func() { e.Embed(dst, w, []int32{0, 4}) }},
		{"negative token", "token -1", func() { e.Embed(dst, w, []int32{-1}) }},
		{"destination too small", "into", func() { e.Embed(dst.Sub(0, 64), w, []int32{0, 1}) }},
		{"unsupported type", "IQ4_NL", func() {
			e.mulMV(dst, &Weight{Region: w.Region, Type: ggml.IQ4_NL, Rows: 4, Cols: 64}, dst, 1)
		}},
		{"x misaligned", "offset 4", func() { e.mulMV(dst, w, dst.Sub(4, 4*64), 1) }},
		{"x too small", "in x", func() { e.mulMV(dst, w, dst.Sub(0, 4*64), 2) }},
		{"no rows", "0 rows", func() { e.mulMV(dst, w, dst, 0) }},
	} {
		wantRefused(t, e, c.what, c.want, c.op)
	}
	if err := SupportsWeight(ggml.Q8_K); err == nil || !strings.Contains(err.Error(), "Q8_K") {
		t.Errorf("SupportsWeight(Q8_K) = %v", err)
	}
	for _, typ := range ggmltest.WeightTypes {
		if err := SupportsWeight(typ); err != nil {
			t.Errorf("SupportsWeight(%v) = %v", typ, err)
		}
	}
}

func seq(n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(i)
	}
	return v
}
