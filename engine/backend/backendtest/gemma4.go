package backendtest

import (
	"math"

	"nibble/engine/backend"
	"nibble/engine/ggml"
)

// testGemma4Ops checks backend.Gemma4Ops where the backend has it:
// RMSNormPlain against float64 (the rms_norm tolerance, in place too) and
// CopyRows exact, leaving everything outside its blocks.
func testGemma4Ops(h *harness) {
	g, ok := h.b.(backend.Gemma4Ops)
	if !ok {
		h.t.Skipf("backend %s has no Gemma 4 ops", h.b.Name())
	}
	for _, shape := range [][2]int{{1, 8}, {7, 64}, {33, 256}, {3, 512}} {
		rows, n := shape[0], shape[1]
		xs := h.normals(rows*n, 3)
		x, dst := h.upload(xs, rows*n), h.upload(make([]float32, rows*n), rows*n)
		const eps = 1e-6
		g.RMSNormPlain(dst, x, eps, rows, n)
		want := make([]float64, rows*n)
		for r := 0; r < rows; r++ {
			var ss float64
			for _, v := range xs[r*n : (r+1)*n] {
				ss += float64(v) * float64(v)
			}
			s := 1 / math.Sqrt(ss/float64(n)+eps)
			for i := r * n; i < (r+1)*n; i++ {
				want[i] = float64(xs[i]) * s
			}
		}
		got := h.read(dst, 0, rows*n)
		closeTo(h.t, "rms norm plain", got, want, 1e-5, 1e-5)
		g.RMSNormPlain(x, x, eps, rows, n)
		if inPlace := h.read(x, 0, rows*n); !equal(inPlace, got) {
			h.t.Fatalf("rms norm plain %d×%d: in place differs", rows, n)
		}
	}
	const rows, n, srcStride, dstStride = 9, 24, 100, 30
	ss, ds := h.normals(rows*srcStride, 1), h.normals(rows*dstStride+5, 1)
	src, dst := h.upload(ss, len(ss)), h.upload(ds, len(ds))
	g.CopyRows(dst, 5, dstStride, src, 40, srcStride, rows, n)
	want := make([]float64, len(ds))
	for i, v := range ds {
		want[i] = float64(v)
	}
	for r := 0; r < rows; r++ {
		for i := 0; i < n; i++ {
			want[5+r*dstStride+i] = float64(ss[40+r*srcStride+i])
		}
	}
	closeTo(h.t, "copy rows", h.read(dst, 0, len(ds)), want, 0, 0)
}

// testExpertScaler checks backend.ExpertScaler where the backend has it:
// every slot's value times its expert's factor, exact.
func testExpertScaler(h *harness) {
	es, ok := h.b.(backend.ExpertScaler)
	if !ok {
		h.t.Skipf("backend %s does not scale by expert", h.b.Name())
	}
	const experts, slots = 7, 40
	factors := h.normals(experts, 1)
	w := h.weight("per_expert_scale", ggml.F32, 1, experts, f32Bytes(factors))
	xs := h.normals(slots, 1)
	ids := make([]float32, slots)
	for i := range ids {
		ids[i] = float32(h.rng.IntN(experts))
	}
	x, id := h.upload(xs, slots), h.upload(ids, slots)
	es.ScaleByExpert(x, w, experts, id, slots)
	want := make([]float64, slots)
	for s := range want {
		want[s] = float64(xs[s] * factors[int(ids[s])])
	}
	closeTo(h.t, "scale by expert", h.read(x, 0, slots), want, 0, 0)
}
