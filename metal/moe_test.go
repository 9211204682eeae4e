//go:build linux

package metal_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/half"
	"nibble/engine/quant"
)

// moeRef is a whole mixture-of-experts block in float64 on the host, from
// the device's routing (ids, weights): per slot gate and up (+ biases),
// the gate (clamped SwiGLU when limit > 0), down (+ bias), the weighted
// sum. With toHalf the three products read weights and inputs rounded to
// half, as the mat-mat kernels' tiles hold them (mulMMRounds).
func moeRef(x []float32, gate, up, down []float32, bg, bu, bd []float32, ids, wts []float32, rows, k, embd, ff int, alpha, limit float64, toHalf bool) []float64 {
	r := func(v float32) float64 {
		if toHalf {
			return float64(half.ToFloat32(half.FromFloat32(v)))
		}
		return float64(v)
	}
	out := make([]float64, rows*embd)
	for row := 0; row < rows; row++ {
		xr := x[row*embd : (row+1)*embd]
		for j := 0; j < k; j++ {
			s := row*k + j
			e := int(ids[s])
			act := make([]float64, ff)
			for i := 0; i < ff; i++ {
				var g, u float64
				for c := 0; c < embd; c++ {
					g += r(gate[(e*ff+i)*embd+c]) * r(xr[c])
					u += r(up[(e*ff+i)*embd+c]) * r(xr[c])
				}
				if bg != nil {
					g += float64(bg[e*ff+i])
					u += float64(bu[e*ff+i])
				}
				if limit > 0 {
					g = math.Min(g, limit)
					u = math.Max(math.Min(u, limit), -limit)
					act[i] = g / (1 + math.Exp(-alpha*g)) * (u + 1)
				} else {
					act[i] = g / (1 + math.Exp(-g)) * u
				}
			}
			for o := 0; o < embd; o++ {
				var d float64
				for i := 0; i < ff; i++ {
					d += r(down[(e*embd+o)*ff+i]) * r(float32(act[i]))
				}
				if bd != nil {
					d += float64(bd[e*embd+o])
				}
				out[row*embd+o] += float64(wts[s]) * d
			}
		}
	}
	return out
}

// A MoE feed-forward block through the backend's Experts ops on the
// emulator, against moeRef: Qwen3-MoE's (Q4_0 experts, softmax then top k,
// renormalised, SwiGLU) and gpt-oss's (MXFP4 experts with biases, top k
// then softmax, clamped SwiGLU), for a decode token (mul_mv_id) and a
// prefill batch (the map and mul_mm_id). The ids are each row's largest
// router logits; the block's output is within 1e-4 of the reference
// (relative to its largest value).
func TestExpertsBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	const embd, ff, experts, k = 64, 96, 16, 4
	for _, c := range []struct {
		typ          ggml.Type
		gating       backend.Gating
		norm, biases bool
		alpha, limit float32
	}{
		{ggml.Q4_0, backend.GatingSoftmax, true, false, 0, 0},
		{ggml.MXFP4, backend.GatingSoftmaxTopK, false, true, 1.702, 7},
	} {
		for _, rows := range []int{1, 12} {
			t.Run(fmt.Sprintf("%v_rows%d", c.typ, rows), func(t *testing.T) {
				b := newBackend(t)
				descs := []backend.WeightDesc{
					{Name: "ffn_gate_inp", Type: ggml.F32, Rows: experts, Cols: embd},
					{Name: "ffn_gate_exps", Type: c.typ, Rows: experts * ff, Cols: embd},
					{Name: "ffn_up_exps", Type: c.typ, Rows: experts * ff, Cols: embd},
					{Name: "ffn_down_exps", Type: c.typ, Rows: experts * embd, Cols: ff},
					{Name: "ffn_gate_exps.bias", Type: ggml.F32, Rows: experts, Cols: ff},
					{Name: "ffn_up_exps.bias", Type: ggml.F32, Rows: experts, Cols: ff},
					{Name: "ffn_down_exps.bias", Type: ggml.F32, Rows: experts, Cols: embd},
				}
				var region []byte
				deq := make([][]float32, len(descs))
				for i := range descs {
					d := &descs[i]
					for len(region)%32 != 0 {
						region = append(region, 0)
					}
					d.Offset = int64(len(region))
					data := ggmltest.RandomWeights(r, d.Type, d.Rows, d.Cols, 0.5)
					region = append(region, data...)
					deq[i] = make([]float32, d.Rows*d.Cols)
					if err := quant.Dequantize(d.Type, deq[i], data); err != nil {
						t.Fatal(err)
					}
				}
				m, err := b.MapWeights(region, descs)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				w := m.Weights()
				slots := rows * k
				xs := make([]float32, rows*embd)
				for i := range xs {
					xs[i] = float32(r.NormFloat64())
				}
				x := b.Alloc(rows * embd)
				logits, ids, wts := b.Alloc(rows*experts), b.Alloc(slots), b.Alloc(slots)
				gate, up, act, y, out := b.Alloc(slots*ff), b.Alloc(slots*ff), b.Alloc(slots*ff), b.Alloc(slots*embd), b.Alloc(rows*embd)
				b.Embed(x, mustF32Table(t, b, xs, rows, embd), seq(rows))
				b.MatMul(logits, w[0], x, rows)
				b.Route(ids, wts, logits, rows, &backend.Router{Experts: experts, Used: k, Gating: c.gating, Norm: c.norm})
				b.MatMulID(gate, w[1], experts, x, ids, rows, k, false)
				b.MatMulID(up, w[2], experts, x, ids, rows, k, false)
				if c.biases {
					b.AddBiasID(gate, w[4], experts, ids, slots)
					b.AddBiasID(up, w[5], experts, ids, slots)
					b.SwiGLUClamped(act, gate, up, slots*ff, c.alpha, c.limit)
				} else {
					b.SwiGLU(act, gate, up, slots*ff)
				}
				b.MatMulID(y, w[3], experts, act, ids, rows, k, true)
				if c.biases {
					b.AddBiasID(y, w[6], experts, ids, slots)
				}
				b.SumExperts(out, y, wts, rows, k, embd)
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				gotIDs, gotW, lg := make([]float32, slots), make([]float32, slots), make([]float32, rows*experts)
				b.Read(gotIDs, ids, 0)
				b.Read(gotW, wts, 0)
				b.Read(lg, logits, 0)
				for row := 0; row < rows; row++ {
					order := make([]int, experts)
					for i := range order {
						order[i] = i
					}
					l := lg[row*experts : (row+1)*experts]
					slices.SortStableFunc(order, func(a, b int) int {
						switch {
						case l[a] > l[b]:
							return -1
						case l[a] < l[b]:
							return 1
						}
						return 0
					})
					for j := 0; j < k; j++ {
						if int(gotIDs[row*k+j]) != order[j] {
							t.Fatalf("row %d: ids %v, want the largest logits' %v", row, gotIDs[row*k:row*k+k], order[:k])
						}
					}
				}
				var bg, bu, bd []float32
				if c.biases {
					bg, bu, bd = deq[4], deq[5], deq[6]
				}
				want := moeRef(xs, deq[1], deq[2], deq[3], bg, bu, bd, gotIDs, gotW, rows, k, embd, ff, float64(c.alpha), float64(c.limit), mulMMRounds(c.typ, rows, embd))
				got := make([]float32, rows*embd)
				b.Read(got, out, 0)
				top := 0.0
				for _, v := range want {
					top = math.Max(top, math.Abs(v))
				}
				for i, v := range got {
					if math.Abs(float64(v)-want[i]) > 1e-4*top {
						t.Fatalf("row %d element %d: %v, want %v (largest %v)", i/embd, i%embd, v, want[i], top)
					}
				}
			})
		}
	}
}

// mustF32Table maps rows×n floats as an F32 table, for Embed to copy into
// a tensor.
func mustF32Table(t *testing.T, b backend.Backend, x []float32, rows, n int) backend.Weight {
	t.Helper()
	region := make([]byte, 4*len(x))
	for i, v := range x {
		u := math.Float32bits(v)
		region[4*i], region[4*i+1], region[4*i+2], region[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	m, err := b.MapWeights(region, []backend.WeightDesc{{Name: "x", Type: ggml.F32, Rows: rows, Cols: n}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.Weights()[0]
}

func seq(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

// Route, AddBiasID, SumExperts and SwiGLUClamped on the Metal backend
// against the CPU backend's: the same ids; weights within 1e-6 relative
// (the CPU's exponentials are float64, the kernel's the CPU's 2^x in
// float32); the bias add exact; the sums (each of its own weights) within
// 1e-5; the clamped SwiGLU within 1e-6 relative.
func TestExpertsMatchCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	const rows, experts, k, n = 6, 32, 4, 40
	mb, cb := newBackend(t), cpu.New(1)
	defer cb.Close()
	logits := make([]float32, rows*experts)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	logits[5], logits[9] = logits[3], logits[3] // a tie
	y := make([]float32, rows*k*n)
	for i := range y {
		y[i] = float32(r.NormFloat64() * 8)
	}
	bias := make([]byte, 4*experts*n)
	for i := 0; i < experts*n; i++ {
		u := math.Float32bits(float32(r.NormFloat64()))
		bias[4*i], bias[4*i+1], bias[4*i+2], bias[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	type run struct{ ids, w, biased, sum, swi []float32 }
	do := func(b backend.Backend) run {
		ex := b.(backend.Experts)
		up := func(v []float32) backend.Tensor {
			x := b.Alloc(len(v))
			b.Copy(x, 0, mustTensor(t, b, v), 0, len(v))
			return x
		}
		m, err := b.MapWeights(bias, []backend.WeightDesc{{Name: "ffn_down_exps.bias", Type: ggml.F32, Rows: experts, Cols: n}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		rev := slices.Clone(y)
		slices.Reverse(rev)
		lg, yt, yr := up(logits), up(y), up(rev)
		ids, w, sum, swi := b.Alloc(rows*k), b.Alloc(rows*k), b.Alloc(rows*n), b.Alloc(rows*k*n)
		var out run
		for _, g := range []backend.Gating{backend.GatingSoftmax, backend.GatingSoftmaxTopK, backend.GatingSigmoid} {
			ex.Route(ids, w, lg, rows, &backend.Router{Experts: experts, Used: k, Gating: g, Norm: g != backend.GatingSoftmaxTopK, Scale: 1.5})
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			i, v := make([]float32, rows*k), make([]float32, rows*k)
			b.Read(i, ids, 0)
			b.Read(v, w, 0)
			out.ids, out.w = append(out.ids, i...), append(out.w, v...)
		}
		ex.AddBiasID(yt, m.Weights()[0], experts, ids, rows*k)
		ex.SumExperts(sum, yt, w, rows, k, n)
		ex.SwiGLUClamped(swi, yt, yr, rows*k*n, 1.702, 7)
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		out.biased, out.sum, out.swi = make([]float32, rows*k*n), make([]float32, rows*n), make([]float32, rows*k*n)
		b.Read(out.biased, yt, 0)
		b.Read(out.sum, sum, 0)
		b.Read(out.swi, swi, 0)
		return out
	}
	got, want := do(mb), do(cb)
	if !slices.Equal(got.ids, want.ids) {
		t.Fatalf("ids: metal %v, cpu %v", got.ids, want.ids)
	}
	for i, v := range got.w {
		if math.Abs(float64(v-want.w[i])) > 1e-6*math.Abs(float64(want.w[i])) {
			t.Fatalf("weight %d: metal %v, cpu %v", i, v, want.w[i])
		}
	}
	if !slices.Equal(got.biased, want.biased) {
		t.Fatalf("bias by id differs from the CPU's")
	}
	// Each sum weighs by its own backend's (last) route weights.
	for i, v := range got.sum {
		if math.Abs(float64(v-want.sum[i])) > 1e-5*(1+math.Abs(float64(want.sum[i]))) {
			t.Fatalf("expert sum %d: metal %v, cpu %v", i, v, want.sum[i])
		}
	}
	for i, v := range got.swi {
		if w := want.swi[i]; math.Abs(float64(v-w)) > 1e-6*math.Abs(float64(w))+1e-9 {
			t.Fatalf("clamped SwiGLU %d: metal %v, cpu %v", i, v, w)
		}
	}
}

// mustTensor is a tensor of b holding v (through an F32 table and Embed).
func mustTensor(t *testing.T, b backend.Backend, v []float32) backend.Tensor {
	t.Helper()
	const n = 16
	rows := (len(v) + n - 1) / n
	pad := append(slices.Clone(v), make([]float32, rows*n-len(v))...)
	x := b.Alloc(rows * n)
	b.Embed(x, mustF32Table(t, b, pad, rows, n), seq(rows))
	return x
}
