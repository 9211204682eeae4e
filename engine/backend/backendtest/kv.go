package backendtest

import (
	"fmt"
	"math"
	"reflect"

	"nibble/engine/backend"
	"nibble/engine/half"
	"nibble/engine/kv"
)

// outlierChannel of every K head is scaled up in the caches filled here, so
// that channel smoothing has something to correct.
const outlierChannel = 5

// kvRows returns n rows of K and V (kvHeads·d floats each), standard
// normal, K's outlier channel 30× larger.
func (h *harness) kvRows(n, kvHeads, d int) (k, v []float32) {
	k, v = h.normals(n*kvHeads*d, 1), h.normals(n*kvHeads*d, 1)
	for i := outlierChannel; i < len(k); i += d {
		k[i] *= 30
	}
	return k, v
}

func (h *harness) newCache(cfg kv.Config, heads, maxBatch int) backend.KVCache {
	h.t.Helper()
	c, err := h.b.NewKVCache(cfg, heads, maxBatch)
	if err != nil {
		h.t.Fatalf("NewKVCache(%+v, %d, %d): %v", cfg, heads, maxBatch, err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// planes syncs and reads the layer's K and V planes.
func (h *harness) planes(c backend.KVCache, layer int) (k, v []byte) {
	h.t.Helper()
	h.sync()
	n := layoutOf(c.Config()).bytes()
	k, v = make([]byte, n), make([]byte, n)
	if err := h.b.ReadKV(c, layer, k, v); err != nil {
		h.t.Fatalf("ReadKV: %v", err)
	}
	return k, v
}

// store issues KVStore of rows k, v at pos (uploading them).
func (h *harness) store(c backend.KVCache, layer int, k, v []float32, pos int) {
	cfg := c.Config()
	w := cfg.KVHeads * cfg.HeadDim
	kt, vt := h.upload(k, w), h.upload(v, w)
	h.b.KVStore(c, layer, kt, vt, pos, len(k)/w)
	h.b.Free(kt)
	h.b.Free(vt)
}

// expectStored writes into the reference planes what storing rows k, v at
// pos must leave, K in key space ks.
func expectStored(l planeLayout, ks keySpace, kRef, vRef []byte, k, v []float32, pos int) (slots []int) {
	cfg := l.cfg
	d := cfg.HeadDim
	for t := 0; t*cfg.KVHeads*d < len(k); t++ {
		for hd := 0; hd < cfg.KVHeads; hd++ {
			src := (t*cfg.KVHeads + hd) * d
			slot := hd*cfg.Ctx + pos + t
			l.store(kRef, slot, ks.key(k[src:src+d], hd))
			l.store(vRef, slot, v[src:src+d])
			slots = append(slots, slot)
		}
	}
	return slots
}

// comparePlanes holds got to want: written slots within one quantization
// step per element with at most 1% of elements differing (rounding ties),
// every other slot byte for byte.
func comparePlanes(h *harness, what string, l planeLayout, got, want []byte, written []int) {
	h.t.Helper()
	isWritten := map[int]bool{}
	for _, s := range written {
		isWritten[s] = true
	}
	d := l.cfg.HeadDim
	differ, total := 0, 0
	for slot := 0; slot < l.cfg.KVHeads*l.cfg.Ctx; slot++ {
		for i := 0; i < d; i++ {
			same := l.code(got, slot, i) == l.code(want, slot, i)
			if l.cfg.Type != kv.F16 && i%l.cfg.GroupSize == 0 {
				gs, gb := l.meta(got, slot, i/l.cfg.GroupSize)
				ws, wb := l.meta(want, slot, i/l.cfg.GroupSize)
				same = same && gs == ws && gb == wb
			}
			if !isWritten[slot] {
				if !same {
					h.t.Fatalf("%s: slot %d (kv head %d, position %d), not written, changed", what, slot, slot/l.cfg.Ctx, slot%l.cfg.Ctx)
				}
				continue
			}
			total++
			if same {
				continue
			}
			differ++
			g, w := l.value(got, slot, i), l.value(want, slot, i)
			if step := l.step(want, slot, i); !(math.Abs(g-w) <= 1.001*step) {
				h.t.Fatalf("%s: kv head %d position %d element %d is %g, want %g (step %g)", what, slot/l.cfg.Ctx, slot%l.cfg.Ctx, i, g, w, step)
			}
		}
	}
	if differ*100 > total {
		h.t.Fatalf("%s: %d of %d stored elements differ from the format's (more than 1%%)", what, differ, total)
	}
}

// KVStore into f16, q8 and q4 planes of every head dim, group sizes 32 and
// 64, with channel smoothing and rotation (head dim 96, which takes the
// general rotation, where the backend rotates it): what the format says,
// written where it says, nothing else touched; smoothing set, changed and
// cleared.
func testKVStore(h *harness) {
	type variant struct {
		gs             int
		smooth, rotate bool
	}
	for _, typ := range kv.Types {
		for _, d := range []int{64, 96, 128, 256} {
			for _, vr := range []variant{{32, false, false}, {32, true, false}, {64, true, false}, {32, true, true}} {
				if typ == kv.F16 && vr.gs == 64 || d == 96 && !(vr.rotate && backend.RotatesHeadDim(h.b, d)) {
					continue
				}
				cfg := kv.Config{Type: typ, GroupSize: vr.gs, Layers: 2, KVHeads: 2, HeadDim: d, Ctx: 40, Smooth: vr.smooth, Rotate: vr.rotate}
				what := fmt.Sprintf("%v d%d gs%d smooth=%v rotate=%v", typ, d, vr.gs, vr.smooth, vr.rotate)
				l := layoutOf(cfg)
				c := h.newCache(cfg, 4, 16)
				if got := c.Config(); !reflect.DeepEqual(got, cfg) {
					h.t.Fatalf("%s: the cache says its config is %+v", what, got)
				}
				k0, v0 := h.planes(c, 0)
				kRef, vRef := h.planes(c, 1)
				// The prompt: calibrate on its rows, then store them at 0.
				k, v := h.kvRows(20, cfg.KVHeads, d)
				lambda := kv.Calibrate(k, 20, cfg.KVHeads, d)
				if vr.smooth && lambda == nil {
					h.t.Fatalf("%s: no smoothing factors for a 30× channel", what)
				}
				h.b.KVSetSmoothing(c, 1, lambda)
				h.store(c, 1, k, v, 0)
				ks, err := newKeySpace(cfg, lambda)
				if err != nil {
					h.t.Fatal(err)
				}
				written := expectStored(l, ks, kRef, vRef, k, v, 0)
				// Later rows, after a gap, keep the calibration.
				k, v = h.kvRows(3, cfg.KVHeads, d)
				h.store(c, 1, k, v, 30)
				written = append(written, expectStored(l, ks, kRef, vRef, k, v, 30)...)
				kGot, vGot := h.planes(c, 1)
				comparePlanes(h, what+": K", l, kGot, kRef, written)
				comparePlanes(h, what+": V", l, vGot, vRef, written)
				// Cleared, the factors no longer apply.
				h.b.KVSetSmoothing(c, 1, nil)
				k, v = h.kvRows(2, cfg.KVHeads, d)
				h.store(c, 1, k, v, 38)
				ks.lambda = nil
				written = append(written, expectStored(l, ks, kRef, vRef, k, v, 38)...)
				kGot, vGot = h.planes(c, 1)
				comparePlanes(h, what+": K after clearing the smoothing", l, kGot, kRef, written)
				comparePlanes(h, what+": V after clearing the smoothing", l, vGot, vRef, written)
				k0Got, v0Got := h.planes(c, 0)
				comparePlanes(h, what+": layer 0 K", l, k0Got, k0, nil)
				comparePlanes(h, what+": layer 0 V", l, v0Got, v0, nil)
			}
		}
	}
}

// filled is a cache whose layer 0 holds positions [0, n) of random K/V
// (calibrated on them, as a prompt would be, and stored in batches of
// maxBatch rows), with what it stores decoded.
type filled struct {
	c      backend.KVCache
	ks     keySpace
	k, v   []float32   // the rows stored, n×KVHeads·HeadDim
	kS, vS [][]float64 // stored values per kv head: [kvh][pos·HeadDim + e]
}

func (h *harness) fill(cfg kv.Config, heads, maxBatch, n int) *filled {
	h.t.Helper()
	f := &filled{c: h.newCache(cfg, heads, maxBatch)}
	f.k, f.v = h.kvRows(n, cfg.KVHeads, cfg.HeadDim)
	var lambda []float32
	if n >= kv.MinCalibrationRows {
		lambda = kv.Calibrate(f.k, n, cfg.KVHeads, cfg.HeadDim)
	}
	h.b.KVSetSmoothing(f.c, 0, lambda)
	var err error
	if f.ks, err = newKeySpace(cfg, lambda); err != nil {
		h.t.Fatal(err)
	}
	// In chunks, as prefill batches store them.
	w := cfg.KVHeads * cfg.HeadDim
	for pos := 0; pos < n; pos += maxBatch {
		end := min(n, pos+maxBatch)
		h.store(f.c, 0, f.k[pos*w:end*w], f.v[pos*w:end*w], pos)
	}
	kp, vp := h.planes(f.c, 0)
	l := layoutOf(cfg)
	f.kS, f.vS = make([][]float64, cfg.KVHeads), make([][]float64, cfg.KVHeads)
	for hd := range f.kS {
		f.kS[hd], f.vS[hd] = make([]float64, n*cfg.HeadDim), make([]float64, n*cfg.HeadDim)
		for t := 0; t < n; t++ {
			l.decode(kp, hd*cfg.Ctx+t, f.kS[hd][t*cfg.HeadDim:])
			l.decode(vp, hd*cfg.Ctx+t, f.vS[hd][t*cfg.HeadDim:])
		}
	}
	return f
}

// attend64 is float64 softmax attention of query head vector q' (already in
// key space) over keys k and values v (count×d, row-major), scaled.
func attend64(q []float32, k, v []float64, d int, scale float64) []float64 {
	count := len(k) / d
	s := make([]float64, count)
	m := math.Inf(-1)
	for t := range s {
		var dot float64
		for e, x := range k[t*d : (t+1)*d] {
			dot += float64(q[e]) * x
		}
		s[t] = dot * scale
		m = math.Max(m, s[t])
	}
	out := make([]float64, d)
	var sum float64
	for t := range s {
		p := math.Exp(s[t] - m)
		sum += p
		for e, x := range v[t*d : (t+1)*d] {
			out[e] += p * x
		}
	}
	for e := range out {
		out[e] /= sum
	}
	return out
}

// checkHeads holds each query head of got to want: ‖Δ‖₂/‖want‖₂ ≤ tol.
func checkHeads(h *harness, what string, got []float32, want [][]float64, tol float64) float64 {
	h.t.Helper()
	worst := 0.0
	for hd, w := range want {
		var ee, ww float64
		for e, x := range w {
			diff := float64(got[hd*len(w)+e]) - x
			ee += diff * diff
			ww += x * x
		}
		rel := math.Sqrt(ee / ww)
		worst = math.Max(worst, rel)
		if !(rel <= tol) {
			h.t.Fatalf("%s: query head %d relative error %.3g > %.3g", what, hd, rel, tol)
		}
	}
	return worst
}

// decodeRef is what AttendDecode must give for query row q at n positions.
func decodeRef(f *filled, q []float32, a *backend.Attention, n int) [][]float64 {
	d, g := a.HeadDim, a.Heads/a.KVHeads
	lo := 0
	if a.Window > 0 {
		lo = max(0, n-a.Window)
	}
	want := make([][]float64, a.Heads)
	for hd := range want {
		kvh := hd / g
		qk := f.ks.query(q[hd*d:(hd+1)*d], kvh)
		want[hd] = attend64(qk, f.kS[kvh][lo*d:n*d], f.vS[kvh][lo*d:n*d], d, float64(a.Scale))
	}
	return want
}

// AttendDecode for f16, q8 and q4 caches, GQA 1/2/4/8, head dims 64-256,
// windows, a scale per call, group size 64, rotation, a cache of 4096
// positions (and counts that are not multiples of a block or a split),
// against float64 attention over the stored values.
func testAttendDecode(h *harness) {
	const tol = 2e-4
	worst := map[kv.Type]float64{}
	decode := func(what string, f *filled, a *backend.Attention, n int) {
		q := h.normals(a.Heads*a.HeadDim, 1)
		qt, out := h.upload(q, len(q)), h.b.Alloc(len(q))
		h.b.AttendDecode(out, qt, f.c, 0, n, a)
		got := h.read(out, 0, len(q))
		typ := f.c.Config().Type
		worst[typ] = math.Max(worst[typ], checkHeads(h, what, got, decodeRef(f, q, a, n), tol))
		h.b.Free(qt)
		h.b.Free(out)
	}
	for _, typ := range kv.Types {
		for _, d := range []int{64, 128, 256} {
			for _, g := range []int{1, 2, 4, 8} {
				cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: d, Ctx: 300, Smooth: true, Rotate: d == 128 && g == 4}
				f := h.fill(cfg, 2*g, 512, 300)
				for _, n := range []int{1, 33, 300} {
					for _, window := range []int{0, 17} {
						// Outlier-channel K makes raw 1/√d scores peaked; scale them down.
						a := &backend.Attention{Heads: 2 * g, KVHeads: 2, HeadDim: d, Window: window,
							Scale: float32((0.02 + 0.08*h.rng.Float64()) / math.Sqrt(float64(d)))}
						decode(fmt.Sprintf("%v d%d g%d rotate=%v n%d w%d", typ, d, g, cfg.Rotate, n, window), f, a, n)
					}
				}
			}
		}
		if d := 96; backend.RotatesHeadDim(h.b, d) {
			// The general rotation: Hadamard blocks of 32 mixed by a DCT-II.
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: d, Ctx: 300, Smooth: true, Rotate: true}
			f := h.fill(cfg, 4, 512, 300)
			for _, n := range []int{1, 33, 300} {
				a := &backend.Attention{Heads: 4, KVHeads: 2, HeadDim: d, Scale: float32(0.05 / math.Sqrt(float64(d)))}
				decode(fmt.Sprintf("%v d%d g2 rotate=true n%d", typ, d, n), f, a, n)
			}
		}
		if typ != kv.F16 {
			cfg := kv.Config{Type: typ, GroupSize: 64, Layers: 1, KVHeads: 2, HeadDim: 128, Ctx: 300, Smooth: true}
			f := h.fill(cfg, 4, 512, 300)
			decode(fmt.Sprintf("%v gs64", typ), f, &backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 128, Scale: 0.01}, 300)
		}
		// Long: eight kv heads (Llama 3), several splits.
		cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 8, HeadDim: 128, Ctx: 4096, Smooth: true}
		f := h.fill(cfg, 32, 512, 4096)
		for _, n := range []int{4095, 2049} {
			for _, window := range []int{0, 1000} {
				a := &backend.Attention{Heads: 32, KVHeads: 8, HeadDim: 128, Window: window, Scale: 0.005}
				decode(fmt.Sprintf("%v long n%d w%d", typ, n, window), f, a, n)
			}
		}
	}
	h.t.Logf("largest per-head relative error against stored values: f16 %.2g, q8 %.2g, q4 %.2g (tolerance %.0g)", worst[kv.F16], worst[kv.Q8], worst[kv.Q4], tol)
}

// AttendPrefill: rows at positions past..past+rows-1 over the cached prefix
// in their window and the new rows through f16, for every cache type, GQA,
// windows, a prompt's first batch (calibrated on its own rows) and rotation.
func testAttendPrefill(h *harness) {
	const tol = 1e-3
	worst := map[kv.Type]float64{}
	for _, typ := range kv.Types {
		for _, c := range []struct {
			d, g, past, rows, window int
			rotate                   bool
		}{
			{128, 4, 0, 40, 0, false}, {64, 1, 45, 70, 0, false}, {128, 2, 300, 33, 0, false},
			{64, 8, 100, 50, 20, false}, {256, 3, 37, 5, 40, false}, {128, 2, 20, 30, 0, true}, {64, 2, 0, 7, 0, false},
			{96, 2, 20, 30, 0, true},
		} {
			if c.d == 96 && !backend.RotatesHeadDim(h.b, c.d) {
				continue
			}
			what := fmt.Sprintf("%v d%d g%d past%d rows%d w%d rotate=%v", typ, c.d, c.g, c.past, c.rows, c.window, c.rotate)
			kvHeads, d := 2, c.d
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: c.past + c.rows, Smooth: true, Rotate: c.rotate}
			a := &backend.Attention{Heads: kvHeads * c.g, KVHeads: kvHeads, HeadDim: d, Window: c.window,
				Scale: float32(0.05 / math.Sqrt(float64(d)))}
			f := h.fill(cfg, a.Heads, c.rows, c.past)
			k, v := h.kvRows(c.rows, kvHeads, d)
			if c.past == 0 {
				// The prompt's first batch: calibrated on its own rows first.
				var lambda []float32
				if c.rows >= kv.MinCalibrationRows {
					lambda = kv.Calibrate(k, c.rows, kvHeads, d)
				}
				h.b.KVSetSmoothing(f.c, 0, lambda)
				var err error
				if f.ks, err = newKeySpace(cfg, lambda); err != nil {
					h.t.Fatal(err)
				}
			}
			qw, kw := a.Heads*d, kvHeads*d
			q := h.normals(c.rows*qw, 1)
			qt, kt, vt := h.upload(q, qw), h.upload(k, kw), h.upload(v, kw)
			out := h.b.Alloc(len(q))
			h.b.AttendPrefill(out, qt, kt, vt, f.c, 0, c.past, c.rows, a)
			got := h.read(out, 0, len(q))
			// The new rows as an f16 cache would hold them, in key space.
			newK, newV := make([][]float64, kvHeads), make([][]float64, kvHeads)
			for i := 0; i < c.rows; i++ {
				for kvh := 0; kvh < kvHeads; kvh++ {
					src := (i*kvHeads + kvh) * d
					for e, x := range f.ks.key(k[src:src+d], kvh) {
						newK[kvh] = append(newK[kvh], float64(half.Round(x)))
						newV[kvh] = append(newV[kvh], float64(half.Round(v[src+e])))
					}
				}
			}
			for i := 0; i < c.rows; i++ {
				pos := c.past + i
				lo := 0
				if c.window > 0 {
					lo = max(0, pos+1-c.window)
				}
				want := make([][]float64, a.Heads)
				for hd := range want {
					kvh := hd / c.g
					keys := append(append([]float64(nil), f.kS[kvh][min(lo, c.past)*d:c.past*d]...), newK[kvh][max(0, lo-c.past)*d:(i+1)*d]...)
					vals := append(append([]float64(nil), f.vS[kvh][min(lo, c.past)*d:c.past*d]...), newV[kvh][max(0, lo-c.past)*d:(i+1)*d]...)
					want[hd] = attend64(f.ks.query(q[i*qw+hd*d:i*qw+(hd+1)*d], kvh), keys, vals, d, float64(a.Scale))
				}
				worst[typ] = math.Max(worst[typ], checkHeads(h, fmt.Sprintf("%s row %d", what, i), got[i*qw:(i+1)*qw], want, tol))
			}
			for _, t := range []backend.Tensor{qt, kt, vt, out} {
				h.b.Free(t)
			}
		}
	}
	h.t.Logf("largest per-head relative error: f16 %.2g, q8 %.2g, q4 %.2g (tolerance %.0g)", worst[kv.F16], worst[kv.Q8], worst[kv.Q4], tol)
}
