//go:build linux

package encoder

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/half"
	"nibble/engine/quant"
	"nibble/metal/device"
	"nibble/metal/internal/emulator"
)

// mmWeights returns rows×cols random elements of t: normal values quantized
// by engine/quant where it can, else random bits with finite scales (the
// K-quants' scale fields at their ggml offsets).
func mmWeights(t *testing.T, rng *rand.Rand, typ ggml.Type, rows, cols int) []byte {
	b := make([]byte, typ.RowBytes(cols)*rows)
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	if quant.Quantize(typ, b, src) == nil {
		return b
	}
	scales := map[ggml.Type][]int{ggml.Q4_K: {0, 2}, ggml.Q6_K: {208}}[typ]
	if scales == nil {
		t.Fatalf("no weights of type %s", typ)
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	ts := typ.TypeSize()
	for blk := 0; blk < len(b)/ts; blk++ {
		for _, off := range scales {
			binary.LittleEndian.PutUint16(b[blk*ts+off:], half.FromFloat32(float32((0.01+rng.Float64())/32)))
		}
	}
	return b
}

// MatMul on the emulator against engine/cpu's MatMul: mulMM for the
// batches of 8 rows and more (TestEncoderMatMulChoice checks the choice),
// mulMV below. The CPU backend
// rounds x to f16 for F16 weights and quantizes it to q8 for the quantized
// types, so the two differ by that rounding: the tolerance is the CPU's
// bound of the backend conformance suite (2e-3·‖w∘x‖₂ for F16,
// 1.4e-2·‖w‖₂·‖x‖∞ + 6e-4·Σ|w·x| for the quantized types) plus the
// kernel's own: 1e-5·Σ|w·x| (float32 accumulation) for mul_mv, and
// (2^-10 + 1e-5)·Σ|w·x| for mul_mm, which rounds w and x to half (but
// for F32 weights).
func TestEncoderMulMM(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct {
		typ              ggml.Type
		outs, cols, rows int
	}{
		{ggml.F16, 70, 64, 9},
		{ggml.Q8_0, 33, 2080, 17},
		{ggml.Q4_0, 100, 256, 33},
		{ggml.Q4_K, 65, 512, 40},
		{ggml.Q6_K, 64, 256, 8},
		{ggml.Q4_K, 65, 512, 3}, // mat-vec
	} {
		t.Run(fmt.Sprintf("%v_%dx%d_rows%d", c.typ, c.outs, c.cols, c.rows), func(t *testing.T) {
			wb := mmWeights(t, rng, c.typ, c.outs, c.cols)
			x := make([]float32, c.rows*c.cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}

			// The CPU backend's answer.
			m, err := cb.MapWeights(wb, []backend.WeightDesc{{Name: "w", Type: c.typ, Rows: c.outs, Cols: c.cols}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			xt, dt := cb.Alloc(len(x)), cb.Alloc(c.rows*c.outs)
			defer cb.Free(xt)
			defer cb.Free(dt)
			copy(xt.(*cpu.Tensor).D, x)
			cb.MatMul(dt, m.Weights()[0], xt, c.rows)
			if err := cb.Sync(); err != nil {
				t.Fatal(err)
			}
			want := dt.(*cpu.Tensor).D

			// The weight at an offset inside a larger region, as in a
			// model's mapping.
			const wOff = 64
			wr := devBytes(t, dev, wb, wOff)
			xr := devFloats(t, dev, x, 0)
			dr := devBytes(t, dev, make([]byte, 4*c.rows*c.outs), 0)
			w := &Weight{Region: wr, Type: c.typ, Rows: c.outs, Cols: c.cols}
			e.MatMul(dr, w, xr, c.rows)
			runEncoded(t, dev, e, emulator.Forward)
			got := readFloats(dr)

			wf := make([]float32, c.outs*c.cols)
			if err := quant.Dequantize(c.typ, wf, wb); err != nil {
				t.Fatal(err)
			}
			for r := 0; r < c.rows; r++ {
				xrow := x[r*c.cols : (r+1)*c.cols]
				var xInf float64
				for _, v := range xrow {
					xInf = math.Max(xInf, math.Abs(float64(v)))
				}
				for o := 0; o < c.outs; o++ {
					var sumAbs, wx2, w2 float64
					for j, v := range wf[o*c.cols : (o+1)*c.cols] {
						p := float64(v) * float64(xrow[j])
						sumAbs += math.Abs(p)
						wx2 += p * p
						w2 += float64(v) * float64(v)
					}
					tol := 1e-5 * sumAbs
					if c.rows >= mulMMMinRows && c.typ != ggml.F32 {
						tol += 0x1p-10 * sumAbs
					}
					if c.typ == ggml.F16 {
						tol += 2e-3 * math.Sqrt(wx2)
					} else {
						tol += 1.4e-2*math.Sqrt(w2)*xInf + 6e-4*sumAbs
					}
					i := r*c.outs + o
					if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) {
						t.Fatalf("row %d output %d: %v, cpu %v (|Δ| %.3g > %.3g)", r, o, got[i], want[i], d, tol)
					}
				}
			}
		})
	}
}

// MatMul's choice: the mat-mat kernel from mulMMMinRows rows on where it
// fits, the mat-vec kernel (mulMV) otherwise; mulMM refuses what its kernel
// cannot do.
func TestEncoderMatMulChoice(t *testing.T) {
	_, e := emuEncoder(t)
	buf := &mmFakeBuffer{n: 1 << 20}
	reg := Region{Buf: buf, Len: buf.n}
	for _, c := range []struct {
		typ        ggml.Type
		cols, rows int
		xOff       int
		mm         bool // mat-mat, else mat-vec
	}{
		{ggml.Q4_K, 256, mulMMMinRows, 0, true},
		{ggml.Q8_0, 64, 512, 0, true},
		{ggml.Q8_0, 64, mulMMMinRows - 1, 0, false},
		{ggml.F16, 48, 64, 0, false}, // columns not whole steps
		{ggml.F32, 64, 64, 4, false}, // x not 16-byte aligned
		{ggml.Q4_0, 64, 1, 0, false}, // decode
	} {
		e.Reset()
		w := &Weight{Region: reg, Type: c.typ, Rows: 10, Cols: c.cols}
		e.MatMul(reg, w, reg.Sub(c.xOff, reg.Len-c.xOff), c.rows)
		var names []string
		for _, d := range e.List().Dispatches() {
			names = append(names, d.Pipeline.Name())
		}
		mmName := "kernel_mul_mm_" + strings.ToLower(c.typ.String())
		var ok bool
		if c.mm {
			ok = e.Err() == nil && len(names) == 1 && names[0] == mmName
		} else {
			// Whatever mulMV encodes, not the mat-mat kernel nor its errors.
			ok = !slices.Contains(names, mmName) && (e.Err() == nil || !strings.HasPrefix(e.Err().Error(), "mul_mm"))
		}
		if !ok {
			t.Errorf("%v cols %d rows %d x at %d: dispatched %q (error %v), want mat-mat %v", c.typ, c.cols, c.rows, c.xOff, names, e.Err(), c.mm)
		}
	}
	for _, c := range []struct {
		name string
		w    Weight
		x    Region
		rows int
	}{
		{"cols", Weight{Region: reg, Type: ggml.F16, Rows: 10, Cols: 48}, reg, 8},
		{"aligned", Weight{Region: reg, Type: ggml.F16, Rows: 10, Cols: 64}, reg.Sub(4, 1024), 8},
		{"x short", Weight{Region: reg, Type: ggml.F16, Rows: 10, Cols: 64}, reg.Sub(0, 4*64*8-4), 8},
		{"w short", Weight{Region: reg.Sub(0, 10), Type: ggml.F16, Rows: 10, Cols: 64}, reg, 8},
		{"rows", Weight{Region: reg, Type: ggml.F16, Rows: 10, Cols: 64}, reg, 0},
		{"type", Weight{Region: reg, Type: ggml.F64, Rows: 10, Cols: 64}, reg, 8},
	} {
		e.Reset()
		e.mulMM(reg, &c.w, c.x, c.rows)
		if e.Err() == nil || e.List().Len() != 0 {
			t.Errorf("mulMM with bad %s: error %v, %d dispatches", c.name, e.Err(), e.List().Len())
		}
	}
	e.Reset()
}

// mmFakeBuffer is a buffer that is never run: for checking what is encoded.
type mmFakeBuffer struct{ n int }

func (b *mmFakeBuffer) Len() int      { return b.n }
func (b *mmFakeBuffer) Bytes() []byte { return nil }
func (b *mmFakeBuffer) Release()      {}

var _ device.Buffer = (*mmFakeBuffer)(nil)
