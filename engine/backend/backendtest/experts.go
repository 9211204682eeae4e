package backendtest

import (
	"fmt"
	"math"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/ggml/ggmltest"
)

// routeRef is backend.Router's choice in float64: the k largest logits
// (the lower id first on ties) and their weights.
func routeRef(x []float32, r *backend.Router) (ids []int, w []float64) {
	taken := make([]bool, len(x))
	for j := 0; j < r.Used; j++ {
		best := -1
		for i, v := range x {
			if !taken[i] && (best < 0 || v > x[best]) {
				best = i
			}
		}
		taken[best] = true
		ids = append(ids, best)
	}
	w = make([]float64, r.Used)
	var denom float64
	switch r.Gating {
	case backend.GatingSigmoid:
		for j, e := range ids {
			w[j] = 1 / (1 + math.Exp(-float64(x[e])))
		}
		denom = 1
	case backend.GatingSoftmaxTopK:
		for j, e := range ids {
			w[j] = math.Exp(float64(x[e]) - float64(x[ids[0]]))
			denom += w[j]
		}
	default:
		m := float64(x[ids[0]])
		for j, e := range ids {
			w[j] = math.Exp(float64(x[e]) - m)
		}
		for _, v := range x {
			denom += math.Exp(float64(v) - m)
		}
	}
	var sum float64
	for j := range w {
		w[j] /= denom
		sum += w[j]
	}
	scale := float64(r.Scale)
	if scale == 0 {
		scale = 1
	}
	for j := range w {
		if r.Norm {
			w[j] /= math.Max(sum, 6.103515625e-5)
		}
		w[j] *= scale
	}
	return ids, w
}

// testExperts: the mixture-of-experts ops (backend.Experts), on a backend
// that has them. Route for the three gatings, with and without
// renormalisation and scale, on logits with ties; MatMulID for Q4_0, Q4_K,
// F16 and MXFP4 experts, a decode row and a batch of 12, x per row and per
// slot, against the float64 product of the chosen experts (mat-vec's
// tolerance); AddBiasID, SumExperts and SwiGLUClamped.
func testExperts(h *harness) {
	ex, ok := h.b.(backend.Experts)
	if !ok {
		h.t.Skip("the backend has no mixture-of-experts ops")
	}
	const rows, experts, k = 12, 16, 4
	logits := h.normals(rows*experts, 2)
	for row := 0; row < rows; row += 3 {
		logits[row*experts+5], logits[row*experts+9] = logits[row*experts+2], logits[row*experts+2]
	}
	lg := h.upload(logits, experts)
	ids, wts := h.b.Alloc(rows*k), h.b.Alloc(rows*k)
	for _, g := range []backend.Gating{backend.GatingSoftmax, backend.GatingSoftmaxTopK, backend.GatingSigmoid} {
		for _, r := range []backend.Router{{Gating: g}, {Gating: g, Norm: true, Scale: 2.5}} {
			r.Experts, r.Used = experts, k
			ex.Route(ids, wts, lg, rows, &r)
			gotIDs, gotW := h.read(ids, 0, rows*k), h.read(wts, 0, rows*k)
			for row := 0; row < rows; row++ {
				wantIDs, wantW := routeRef(logits[row*experts:(row+1)*experts], &r)
				for j := 0; j < k; j++ {
					if gotIDs[row*k+j] != float32(wantIDs[j]) {
						h.t.Fatalf("route %+v row %d: ids %v, want %v", r, row, gotIDs[row*k:row*k+k], wantIDs)
					}
				}
				closeTo(h.t, fmt.Sprintf("route %+v row %d weights", r, row), gotW[row*k:row*k+k], wantW, 1e-5, 1e-7)
			}
		}
	}
	// The last routing (sigmoid, renormalised) feeds the rest.
	idv, wv := h.read(ids, 0, rows*k), h.read(wts, 0, rows*k)

	const cols, outs = 256, 40
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q4_K, ggml.F16, ggml.MXFP4} {
		data := ggmltest.RandomWeights(h.rng, typ, experts*outs, cols, 0.5)
		w := h.weight("ffn_up_exps", typ, experts*outs, cols, data)
		wf := h.dequantized(typ, experts*outs, cols, data)
		c, relative := matmulTolerance(typ)
		for _, n := range []int{1, rows} {
			for _, perSlot := range []bool{false, true} {
				xrows := n
				if perSlot {
					xrows = n * k
				}
				xs := h.normals(xrows*cols, 1)
				x, dst := h.upload(xs, cols), h.b.Alloc(n*k*outs)
				ex.MatMulID(dst, w, experts, x, ids, n, k, perSlot)
				got := h.read(dst, 0, n*k*outs)
				for s := 0; s < n*k; s++ {
					xr := xs[(s/k)*cols : (s/k+1)*cols]
					if perSlot {
						xr = xs[s*cols : (s+1)*cols]
					}
					e := int(idv[s])
					for i := 0; i < outs; i++ {
						var want, sumAbs, wx2, w2 float64
						for j, wij := range wf[(e*outs+i)*cols : (e*outs+i+1)*cols] {
							p := wij * float64(xr[j])
							want, sumAbs, wx2, w2 = want+p, sumAbs+math.Abs(p), wx2+p*p, w2+wij*wij
						}
						tol := 1e-5*sumAbs + 1e-30
						if relative {
							tol += c * math.Sqrt(wx2)
						} else {
							tol += c*math.Sqrt(w2)*maxAbs(xr) + 6e-4*sumAbs
						}
						if d := math.Abs(float64(got[s*outs+i]) - want); !(d <= tol) {
							h.t.Fatalf("matmul-id %v rows %d per slot %v: slot %d (expert %d) output %d is %g, want %g", typ, n, perSlot, s, e, i, got[s*outs+i], want)
						}
					}
				}
				h.b.Free(x)
				h.b.Free(dst)
			}
		}
	}

	const n = 48
	ys, bias := h.normals(rows*k*n, 1), h.normals(experts*n, 1)
	y := h.upload(ys, n)
	ex.AddBiasID(y, h.weight("ffn_down_exps.bias", ggml.F32, experts, n, f32Bytes(bias)), experts, ids, rows*k)
	got := h.read(y, 0, rows*k*n)
	for s := 0; s < rows*k; s++ {
		for i := 0; i < n; i++ {
			if want := ys[s*n+i] + bias[int(idv[s])*n+i]; got[s*n+i] != want {
				h.t.Fatalf("add-bias-id: slot %d element %d is %v, want %v", s, i, got[s*n+i], want)
			}
		}
	}
	sum := h.b.Alloc(rows * n)
	ex.SumExperts(sum, y, wts, rows, k, n)
	gotSum := h.read(sum, 0, rows*n)
	for row := 0; row < rows; row++ {
		want, scale := make([]float64, n), 0.0
		for j := 0; j < k; j++ {
			for i := 0; i < n; i++ {
				p := float64(wv[row*k+j]) * float64(got[(row*k+j)*n+i])
				want[i] += p
				scale = math.Max(scale, math.Abs(p))
			}
		}
		closeTo(h.t, fmt.Sprintf("sum-experts row %d", row), gotSum[row*n:(row+1)*n], want, 1e-6, 1e-6*scale)
	}

	gate, up := h.normals(rows*n, 6), h.normals(rows*n, 6)
	gate[0], gate[1], up[2], up[3] = 9, -20, 9, -9 // past the limit
	gt, ut, out := h.upload(gate, n), h.upload(up, n), h.b.Alloc(rows*n)
	const alpha, limit = 1.702, 7.0
	ex.SwiGLUClamped(out, gt, ut, rows*n, alpha, limit)
	want := make([]float64, rows*n)
	for i := range want {
		g := math.Min(float64(gate[i]), limit)
		u := math.Max(math.Min(float64(up[i]), limit), -limit)
		want[i] = g / (1 + math.Exp(-alpha*g)) * (u + 1)
	}
	closeTo(h.t, "swiglu-clamped", h.read(out, 0, rows*n), want, 1e-5, 1e-7)
}
