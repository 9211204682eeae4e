package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
	"nibble/engine/quant"
)

func tensorOf(b *Backend, v []float32) *Tensor {
	t := b.Alloc(len(v)).(*Tensor)
	copy(t.D, v)
	return t
}

// refRoute is the router by its definition in float64: sort by logit (a
// stable sort keeps the lower id first on ties), then the gating.
func refRoute(logits []float32, r *backend.Router) ([]int, []float64) {
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	ids = ids[:r.Used]
	w := make([]float64, r.Used)
	switch r.Gating {
	case backend.GatingSoftmax:
		var z float64
		for _, v := range logits {
			z += math.Exp(float64(v))
		}
		for j, e := range ids {
			w[j] = math.Exp(float64(logits[e])) / z
		}
	case backend.GatingSoftmaxTopK:
		var z float64
		for _, e := range ids {
			z += math.Exp(float64(logits[e]))
		}
		for j, e := range ids {
			w[j] = math.Exp(float64(logits[e])) / z
		}
	case backend.GatingSigmoid:
		for j, e := range ids {
			w[j] = 1 / (1 + math.Exp(-float64(logits[e])))
		}
	}
	if r.Norm {
		var s float64
		for _, v := range w {
			s += v
		}
		for j := range w {
			w[j] /= s
		}
	}
	if r.Scale != 0 {
		for j := range w {
			w[j] *= float64(r.Scale)
		}
	}
	return ids, w
}

// Route against its definition for every gating, with and without
// renormalisation and scale, including rows whose logits tie (the lower
// id goes first, as a stable sort puts it) and a row of equal logits.
func TestRouteMatchesDefinition(t *testing.T) {
	b := New(2)
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, n = 40, 16
	logits := make([]float32, rows*n)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	// Row 0: ties across the cut at k; row 1: all equal; row 2: a tie
	// between the two largest.
	for i := range n {
		logits[i] = float32(i % 3)
		logits[n+i] = 0.5
	}
	logits[2*n+5], logits[2*n+9] = 9, 9
	lt := tensorOf(b, logits)
	for _, g := range []backend.Gating{backend.GatingSoftmax, backend.GatingSoftmaxTopK, backend.GatingSigmoid} {
		for _, r := range []backend.Router{
			{Experts: n, Used: 4, Gating: g},
			{Experts: n, Used: 4, Gating: g, Norm: true},
			{Experts: n, Used: 1, Gating: g, Scale: 2.5},
			{Experts: n, Used: n, Gating: g, Norm: true, Scale: 0.5},
		} {
			ids, w := b.Alloc(rows*r.Used).(*Tensor), b.Alloc(rows*r.Used).(*Tensor)
			b.Route(ids, w, lt, rows, &r)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			for row := range rows {
				wantIDs, wantW := refRoute(logits[row*n:(row+1)*n], &r)
				for j := range r.Used {
					got := ids.D[row*r.Used+j]
					if got != float32(wantIDs[j]) {
						t.Fatalf("gating %d %+v row %d: ids %v, want %v", g, r, row, ids.D[row*r.Used:(row+1)*r.Used], wantIDs)
					}
					if gw := float64(w.D[row*r.Used+j]); math.Abs(gw-wantW[j]) > 1e-6*math.Max(1, math.Abs(wantW[j])) {
						t.Fatalf("gating %d %+v row %d slot %d: weight %g, want %g", g, r, row, j, gw, wantW[j])
					}
				}
			}
		}
	}
	// NaN never wins over a number.
	nan := tensorOf(b, []float32{float32(math.NaN()), -3, float32(math.NaN()), -5})
	ids, w := b.Alloc(2).(*Tensor), b.Alloc(2).(*Tensor)
	b.Route(ids, w, nan, 1, &backend.Router{Experts: 4, Used: 2, Gating: backend.GatingSoftmax})
	if !slices.Equal(ids.D, []float32{1, 3}) {
		t.Errorf("NaN logits: ids %v, want [1 3]", ids.D)
	}
	b.Route(ids, w, nan, 1, &backend.Router{Experts: 4, Used: 2, Gating: backend.Gating(9)})
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "gating") {
		t.Errorf("unknown gating: %v", err)
	}
}

// MatMulID through the backend for every weight type against the expert
// matrices dequantized (decode and a grouped batch); an id that is not a
// whole expert number fails at Sync.
func TestBackendMatMulID(t *testing.T) {
	b := New(2)
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	const experts, m, cols, k = 6, 8, 256, 2
	for _, typ := range ggmltest.WeightTypes {
		region := ggmltest.RandomWeights(rng, typ, experts*m, cols, 0.5)
		mp, err := b.MapWeights(region, []backend.WeightDesc{{Name: "exps", Type: typ, Rows: experts * m, Cols: cols}})
		if err != nil {
			t.Fatal(err)
		}
		w := mp.Weights()[0]
		deq := make([]float32, experts*m*cols)
		if err := quant.Dequantize(typ, deq, region); err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{1, 24} {
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			idv := make([]float32, rows*k)
			for r := range rows {
				idv[r*k], idv[r*k+1] = float32(r%experts), float32((r+3)%experts)
			}
			dst := b.Alloc(rows * k * m).(*Tensor)
			b.MatMulID(dst, w, experts, tensorOf(b, x), tensorOf(b, idv), rows, k, false)
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			for s, e := range idv {
				xr := x[s/k*cols : (s/k+1)*cols]
				for r := range m {
					var want, scale float64
					for j, v := range xr {
						p := float64(deq[(int(e)*m+r)*cols+j]) * float64(v)
						want += p
						scale += math.Abs(p)
					}
					if d := math.Abs(float64(dst.D[s*m+r]) - want); d > 2e-2*scale+1e-6 {
						t.Fatalf("%s rows %d slot %d row %d: %g, want %g", typ, rows, s, r, dst.D[s*m+r], want)
					}
				}
			}
		}
		b.MatMulID(b.Alloc(k*m), w, experts, tensorOf(b, make([]float32, cols)), tensorOf(b, []float32{1.5, 0}), 1, k, false)
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "expert id 1.5") {
			t.Errorf("%s: fractional id: %v", typ, err)
		}
		b.MatMulID(b.Alloc(k*m), w, experts, tensorOf(b, make([]float32, cols)), tensorOf(b, []float32{6, 0}), 1, k, false)
		if err := b.Sync(); err == nil {
			t.Errorf("%s: id past the experts accepted", typ)
		}
	}
}

// AddBiasID adds each slot's expert row; SumExperts weighs and sums a
// token's slots; SwiGLUClamped is gpt-oss's gate by its definition.
func TestExpertElementOps(t *testing.T) {
	b := New(2)
	defer b.Close()
	bias := []float32{1, 2, 3, 10, 20, 30, 100, 200, 300} // 3 experts × 3
	region := make([]byte, 4*len(bias))
	copy(bytesAsFloats(region), bias)
	mp, err := b.MapWeights(region, []backend.WeightDesc{{Name: "b", Type: ggml.F32, Rows: 3, Cols: 3}})
	if err != nil {
		t.Fatal(err)
	}
	x := tensorOf(b, []float32{0, 0, 0, 1, 1, 1, 0.5, 0.5, 0.5, 0, 0, 0})
	b.AddBiasID(x, mp.Weights()[0], 3, tensorOf(b, []float32{2, 0, 1, 2}), 4)
	if want := []float32{100, 200, 300, 2, 3, 4, 10.5, 20.5, 30.5, 100, 200, 300}; !slices.Equal(x.D, want) {
		t.Errorf("AddBiasID: %v, want %v", x.D, want)
	}

	// 2 tokens × 2 slots of 3.
	y := tensorOf(b, []float32{1, 2, 3, 10, 20, 30, -1, -2, -3, 4, 5, 6})
	w := tensorOf(b, []float32{0.5, 0.25, 2, 1})
	dst := b.Alloc(6).(*Tensor)
	b.SumExperts(dst, y, w, 2, 2, 3)
	if want := []float32{3, 6, 9, 2, 1, 0}; !slices.Equal(dst.D, want) {
		t.Errorf("SumExperts: %v, want %v", dst.D, want)
	}

	const n, alpha, limit = 2001, 1.702, 7
	gate, up := b.Alloc(n).(*Tensor), b.Alloc(n).(*Tensor)
	for i := range n {
		gate.D[i] = float32(i-n/2) / 50 // [-20, 20]
		up.D[i] = float32(n/2-i) / 70
	}
	out := b.Alloc(n).(*Tensor)
	b.SwiGLUClamped(out, gate, up, n, alpha, limit)
	for i := range n {
		g := math.Min(float64(gate.D[i]), limit)
		u := math.Max(-limit, math.Min(float64(up.D[i]), limit))
		want := g / (1 + math.Exp(-alpha*g)) * (u + 1)
		if d := math.Abs(float64(out.D[i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("swiglu_clamped(%g, %g) = %g, want %g", gate.D[i], up.D[i], out.D[i], want)
		}
	}
}
