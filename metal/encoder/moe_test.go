//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/quant"
	"nibble/metal/internal/emulator"
)

// moeIDs are rows·k expert ids (each row's k distinct), as floats.
func moeIDs(r *rand.Rand, rows, k, experts int) []float32 {
	ids := make([]float32, 0, rows*k)
	for row := 0; row < rows; row++ {
		for _, e := range r.Perm(experts)[:k] {
			ids = append(ids, float32(e))
		}
	}
	return ids
}

// MatMulID through both of its kernels (mul_mv_id below 8 rows, the map
// and mul_mm_id from 8) against the float64 product of the chosen
// experts' dequantized rows, within 1e-5·Σ|w·x|; then Route, the biases
// by id and SumExperts composed as a MoE block would use them.
func TestEncoderMatMulID(t *testing.T) {
	dev, e := emuEncoder(t)
	r := rand.New(rand.NewPCG(61, 62))
	type tc struct {
		typ                          ggml.Type
		experts, outs, cols, rows, k int
		perSlot                      bool
	}
	for _, c := range []tc{
		{ggml.Q4_0, 16, 40, 128, 1, 4, false}, {ggml.Q4_0, 16, 40, 128, 3, 4, true},
		{ggml.Q4_0, 16, 72, 128, 8, 4, false}, {ggml.Q4_K, 8, 64, 256, 40, 2, true}, {ggml.F16, 8, 33, 64, 9, 8, false},
	} {
		w := mmWeights(t, r, c.typ, c.experts*c.outs, c.cols)
		wf := make([]float32, c.experts*c.outs*c.cols)
		if err := quant.Dequantize(c.typ, wf, w); err != nil {
			t.Fatal(err)
		}
		slots := c.rows * c.k
		xrows := c.rows
		if c.perSlot {
			xrows = slots
		}
		x := randomFloats(r, xrows*c.cols, 1)
		ids := moeIDs(r, c.rows, c.k, c.experts)
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("%v_rows%d_k%d_slot%v_%v", c.typ, c.rows, c.k, c.perSlot, o), func(t *testing.T) {
				// Block types at an offset of 4 mod 16 (a fused tensor's
				// second half may start there).
				off := 32
				if c.typ.BlockSize() > 1 {
					off = 36
				}
				wr := devBytes(t, dev, w, off)
				wt := &Weight{Region: wr, Type: c.typ, Rows: c.experts * c.outs, Cols: c.cols}
				dst := devFloats(t, dev, make([]float32, slots*c.outs), 16)
				e.MatMulID(dst, wt, c.experts, devFloats(t, dev, x, 0), devFloats(t, dev, ids, 0), c.rows, c.k, c.perSlot)
				runEncoded(t, dev, e, o)
				got := readFloats(dst)
				for s := 0; s < slots; s++ {
					xr := x[(s/c.k)*c.cols:]
					if c.perSlot {
						xr = x[s*c.cols:]
					}
					ex := int(ids[s])
					for i := 0; i < c.outs; i++ {
						var want, sum float64
						for j, v := range wf[(ex*c.outs+i)*c.cols : (ex*c.outs+i+1)*c.cols] {
							want += float64(v) * float64(xr[j])
							sum += math.Abs(float64(v) * float64(xr[j]))
						}
						tol := 1e-5 * sum
						if c.rows >= mulMMMinRows && c.typ != ggml.F32 {
							tol += 0x1p-10 * sum // the mat-mat tiles hold w and x as half
						}
						if d := math.Abs(float64(got[s*c.outs+i]) - want); !(d <= tol) {
							t.Fatalf("slot %d (expert %d) output %d: %v, want %v", s, ex, i, got[s*c.outs+i], want)
						}
					}
				}
			})
		}
	}
}

// Route, AddBiasID and SumExperts as a block uses them: the weights of a
// softmax over all experts renormalised over the chosen ones sum to the
// scale, the ids are each row's largest logits, and the sum of bias rows
// weighted by them is what SumExperts gives.
func TestEncoderRouteBiasSum(t *testing.T) {
	dev, e := emuEncoder(t)
	r := rand.New(rand.NewPCG(63, 64))
	const rows, experts, k, n = 5, 64, 8, 48
	logits := randomFloats(r, rows*experts, 1)
	bias := randomFloats(r, experts*n, 1)
	ids := devFloats(t, dev, make([]float32, rows*k), 0)
	wts := devFloats(t, dev, make([]float32, rows*k), 0)
	y := devFloats(t, dev, make([]float32, rows*k*n), 0)
	out := devFloats(t, dev, make([]float32, rows*n), 0)
	e.Route(ids, wts, devFloats(t, dev, logits, 0), rows, &backend.Router{Experts: experts, Used: k, Norm: true, Scale: 2})
	e.AddBiasID(y, &Weight{Region: devFloats(t, dev, bias, 0), Type: ggml.F32, Rows: experts, Cols: n}, experts, ids, rows*k)
	e.SumExperts(out, y, wts, rows, k, n)
	runEncoded(t, dev, e, emulator.Forward)
	gotIDs, gotW, got := readFloats(ids), readFloats(wts), readFloats(out)
	for row := 0; row < rows; row++ {
		var sum float64
		for j := 0; j < k; j++ {
			sum += float64(gotW[row*k+j])
			if j > 0 && logits[row*experts+int(gotIDs[row*k+j])] > logits[row*experts+int(gotIDs[row*k+j-1])] {
				t.Fatalf("row %d: ids %v not in descending logit order", row, gotIDs[row*k:row*k+k])
			}
		}
		if math.Abs(sum-2) > 1e-5 {
			t.Errorf("row %d: weights sum to %v, want 2", row, sum)
		}
		for i := 0; i < n; i++ {
			var want float64
			for j := 0; j < k; j++ {
				want += float64(gotW[row*k+j]) * float64(bias[int(gotIDs[row*k+j])*n+i])
			}
			if math.Abs(float64(got[row*n+i])-want) > 1e-5 {
				t.Fatalf("row %d element %d: %v, want %v", row, i, got[row*n+i], want)
			}
		}
	}
}

// The MoE ops refuse what their kernels cannot do, encoding nothing.
func TestEncoderMoERefused(t *testing.T) {
	dev, e := emuEncoder(t)
	f := devFloats(t, dev, make([]float32, 4096), 0)
	w := &Weight{Region: devBytes(t, dev, make([]byte, 18*4*16), 0), Type: ggml.Q4_0, Rows: 16, Cols: 128}
	for _, c := range []struct {
		name, want string
		op         func()
	}{
		{"gating", "unknown gating", func() { e.Route(f, f, f, 1, &backend.Router{Experts: 8, Used: 2, Gating: 7}) }},
		{"used", "chosen", func() { e.Route(f, f, f, 1, &backend.Router{Experts: 64, Used: 33}) }},
		{"experts", "experts", func() { e.Route(f, f, f, 1, &backend.Router{Experts: 2048, Used: 8}) }},
		{"logits", "floats", func() { e.Route(f, f, f, 100, &backend.Router{Experts: 64, Used: 8}) }},
		{"split", "experts' matrices", func() { e.MatMulID(f, w, 3, f, f, 1, 2, false) }},
		{"k", "slots", func() { e.MatMulID(f, w, 4, f, f, 1, 5, false) }},
		{"bias type", "F32 only", func() { e.AddBiasID(f, w, 4, f, 1) }},
		{"limit", "limit", func() { e.SwiGLUClamped(f, f, f, 4, 1.702, 0) }},
		{"sum", "floats", func() { e.SumExperts(f, f, f, 64, 8, 64) }},
	} {
		wantRefused(t, e, c.name, c.want, c.op)
	}
}
