//go:build linux

package shaders

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"nibble/engine/backend"
	"nibble/engine/cpu/attention"
	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/parallel"
	"nibble/metal/encoder"
	"nibble/metal/internal/emulator"
)

// The attention kernels are dispatched through metal/encoder, which picks
// their function constants, grids, splits and bindings: what runs on a Mac.

// attnCase is one shape: cache type and group, head dim, kv heads, GQA
// group, positions (decode: n; prefill: past and rows), window, smoothing
// and rotation.
type attnCase struct {
	typ          kv.Type
	gs, d        int
	kvHeads, g   int
	n            int // decode: positions; prefill: past
	rows         int // prefill
	window       int
	smooth, rot  bool
	scoresStride int // decode: export scores at this stride (0: none)
	residual     int // the f16 residual window (q4, q8)
	// rewind > 0: the cache is first filled 40 positions past n (past for
	// prefill), then rewound, rows rewind.. stored again; the ring then
	// holds a shorter run than its window.
	rewind int
	// softcap > 0: scores are soft-capped (Gemma 2); queries are then
	// scaled by qmul so that scores reach past the cap.
	softcap, qmul float32
	// ring: the layer keeps only its window, in a ring of window slots
	// (kv.Config.LayerWindow), position p at slot p mod window.
	ring bool
	// cores > 0: the encoder sizes decode's grid for a GPU of this many
	// cores (encoder.SetCores): few cores and many positions give few
	// splits, so each simdgroup runs several blocks a split.
	cores int
}

func (c attnCase) String() string {
	s := fmt.Sprintf("%v_gs%d_d%d_kv%d_g%d_n%d", c.typ, c.gs, c.d, c.kvHeads, c.g, c.n)
	if c.rows > 0 {
		s += fmt.Sprintf("_rows%d", c.rows)
	}
	if c.window > 0 {
		s += fmt.Sprintf("_w%d", c.window)
	}
	if c.smooth {
		s += "_smooth"
	}
	if c.rot {
		s += "_rot"
	}
	if c.scoresStride > 0 {
		s += "_scores"
	}
	if c.residual > 0 {
		s += fmt.Sprintf("_res%d", c.residual)
	}
	if c.rewind > 0 {
		s += fmt.Sprintf("_rewind%d", c.rewind)
	}
	if c.softcap > 0 {
		s += fmt.Sprintf("_cap%g_q%g", c.softcap, c.qmul)
	}
	if c.cores > 0 {
		s += fmt.Sprintf("_cores%d", c.cores)
	}
	if c.ring {
		s += "_ring"
	}
	return s
}

func (c attnCase) params() attention.Params {
	return attention.Params{Heads: c.kvHeads * c.g, KVHeads: c.kvHeads, HeadDim: c.d,
		Scale: float32(1 / math.Sqrt(float64(c.d))), Window: c.window, Softcap: c.softcap}
}

// query is rows query rows for c (attnRows, times c.qmul when set).
func (c attnCase) query(r *rand.Rand, rows int) []float32 {
	p := c.params()
	q := attnRows(r, rows, p.Heads, p.HeadDim, false)
	if c.qmul != 0 {
		for i := range q {
			q[i] *= c.qmul
		}
	}
	return q
}

// backendAttention is p as the encoder takes it.
func backendAttention(p attention.Params) *backend.Attention {
	return &backend.Attention{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Scale: p.Scale, Window: p.Window, Softcap: p.Softcap}
}

// attnRows are K, V or Q rows: normal values, K with two outlier channels
// per head (what smoothing is for) and twice the spread so that the softmax
// has clear winners.
func attnRows(r *rand.Rand, rows, heads, d int, outliers bool) []float32 {
	x := make([]float32, rows*heads*d)
	for i := range x {
		x[i] = float32(2 * r.NormFloat64())
		if outliers && (i%d == 5 || i%d == d-3) {
			x[i] *= 12
		}
	}
	return x
}

// attnFixture is a cache filled on the CPU (kv.Cache.Append) and the same
// bytes on the device, with the positions its residual window's ring holds.
type attnFixture struct {
	cache *kv.Cache
	layer encoder.KVLayer
}

func newAttnFixture(t *testing.T, d *emulator.Device, r *rand.Rand, c attnCase, ctx, filled int) *attnFixture {
	t.Helper()
	cfg := kv.Config{Type: c.typ, GroupSize: c.gs, Layers: 1, KVHeads: c.kvHeads, HeadDim: c.d, Ctx: ctx,
		Rotate: c.rot, Smooth: c.smooth, Residual: c.residual}
	if c.typ == kv.F16 {
		cfg.GroupSize = 0
	}
	if c.ring {
		cfg.LayerWindow = []int{c.window}
		if cfg.LayerRing(0) == 0 {
			t.Fatalf("%v: a window of %d in a context of %d is no ring", c, c.window, ctx)
		}
	}
	cache, err := kv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lambda []float32
	if cfg.Smooths() {
		// Powers of two from 1/4 to 4, larger on the outlier channels.
		lambda = make([]float32, c.kvHeads*c.d)
		for i := range lambda {
			lambda[i] = float32(math.Ldexp(1, r.IntN(5)-2))
			if i%c.d == 5 || i%c.d == c.d-3 {
				lambda[i] = 8
			}
		}
		if err := cache.SetLambda(0, lambda); err != nil {
			t.Fatal(err)
		}
	}
	appendRows := func(pos, rows int) {
		k := attnRows(r, rows, c.kvHeads, c.d, true)
		v := attnRows(r, rows, c.kvHeads, c.d, false)
		if err := cache.Append(0, pos, k, v, rows); err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case c.rewind > 0:
		appendRows(0, filled+40)
		appendRows(c.rewind, filled-c.rewind)
	case filled > 0:
		appendRows(0, filled)
	}
	lv := cache.Layer(0)
	f := &attnFixture{cache: cache}
	f.layer = encoder.KVLayer{Cfg: cfg,
		K: region(t, d, lv.K.Raw), V: region(t, d, lv.V.Raw), Smoothed: lambda != nil}
	if w := cfg.LayerResidual(0); w > 0 {
		f.layer.Tail = make([]int32, w)
		for i := range f.layer.Tail {
			f.layer.Tail[i] = -1
		}
		for pos := range ctx {
			if lv.TailHolds(pos) {
				f.layer.Tail[pos%w] = int32(pos)
			}
		}
	}
	if lambda != nil {
		f.layer.Lambda = region(t, d, f32Bytes(lambda))
	}
	return f
}

func region(t *testing.T, d *emulator.Device, b []byte) encoder.Region {
	t.Helper()
	return encoder.Region{Buf: buffer(t, d, b), Len: len(b)}
}

// runEncoded runs what enc encoded in order o.
func runEncoded(t *testing.T, d *emulator.Device, o emulator.Order, enc *encoder.Encoder) {
	t.Helper()
	if err := enc.Err(); err != nil {
		t.Fatal(err)
	}
	submit(t, d, o, enc.List())
	enc.Reset()
}

// attnCompare fails when got and want differ by more than tol·max|want|.
func attnCompare(t *testing.T, what string, got, want []float32, width int, tol float64) {
	t.Helper()
	var scale, worst float64
	at := 0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		e := math.Abs(float64(got[i] - want[i]))
		if !(e <= worst) {
			worst, at = e, i
		}
	}
	if !(worst <= tol*scale) {
		t.Fatalf("%s: row %d element %d: %v, want %v (error %.3g of max %.3g, %.2g relative, tolerance %g)",
			what, at/width, at%width, got[at], want[at], worst, scale, worst/scale, tol)
	}
	if testing.Verbose() {
		t.Logf("%s: worst error %.2g relative to max|out|", what, worst/scale)
	}
}

// attnDecodeTol: the kernels and engine/cpu/attention compute the same sums in
// float32 in other orders (other blocks per split, dot products four wide
// here, eight there) and exp2 differs in the last bits: 2e-5 of max|out|
// (the worst seen is 8.7e-6).
const attnDecodeTol = 2e-5

// attnKernels are decode's pass 1 kernels (encoder.SetAttnKernel), each
// test name's suffix, and its tolerances' factor: with half operands
// (encoder.AttnMatrixHalf) q', K, V and p are rounded to f16 (relative
// 2^-11 each) before float sums, so 500× (1e-2 of max|out|: the worst
// seen, 4.6e-3, is a smoothed cache, whose K values k/λ reach f16's
// subnormals).
var attnKernels = []struct {
	kernel encoder.AttnKernel
	suffix string
	scale  float64
}{
	{encoder.AttnScalar, "", 1},
	{encoder.AttnMatrix, "_matrix", 1},
	{encoder.AttnMatrixHalf, "_matrixhalf", 500},
}

// kernel_attn_decode_{q4,q8,f16}, kernel_attn_decode_mma(h)_{q4,q8,f16}
// (encoder.SetAttnKernel) and kernel_attn_merge_f32 (through
// encoder.AttendDecode) against engine/cpu/attention.Decode on the same cache
// bytes. Tolerance: attnDecodeTol relative to the largest output.
func TestAttnDecode(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(51, 52))
	start := time.Now()
	cases := []attnCase{
		// q4: every head dim, GQA 1/2/4/8, gs 32/64, N from 1 to 4096.
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 1000, smooth: true, rot: true},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 4, g: 1, n: 33},
		{typ: kv.Q4, gs: 32, d: 256, kvHeads: 1, g: 8, n: 257, smooth: true},
		{typ: kv.Q4, gs: 64, d: 128, kvHeads: 1, g: 1, n: 1},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 2, n: 31, rot: true},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 4096, window: 1000, rot: true},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 1, g: 8, n: 4096, smooth: true},
		{typ: kv.Q4, gs: 64, d: 256, kvHeads: 1, g: 12, n: 300, window: 40},              // G 12: two threadgroups of 6 heads
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 8, g: 4, n: 4096, smooth: true, rot: true}, // Llama 3 8B's layer
		// q8 and f16.
		{typ: kv.Q8, gs: 32, d: 128, kvHeads: 2, g: 4, n: 1000, smooth: true},
		{typ: kv.Q8, gs: 64, d: 256, kvHeads: 1, g: 2, n: 31, rot: true},
		{typ: kv.Q8, gs: 32, d: 64, kvHeads: 1, g: 8, n: 4096, window: 100, smooth: true, rot: true},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 4, n: 257},
		{typ: kv.F16, d: 64, kvHeads: 1, g: 1, n: 4096, window: 500},
		{typ: kv.F16, d: 256, kvHeads: 1, g: 16, n: 33, rot: true},
		// The residual window: 1, 64, longer than and as long as the
		// positions, a ring that wraps inside the positions it holds, one
		// shortened by a rewind, one a sliding window cuts into, and one
		// long enough that splits end inside it.
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 1000, smooth: true, rot: true, residual: 1},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 1, g: 8, n: 300, smooth: true, residual: 64},
		{typ: kv.Q4, gs: 64, d: 256, kvHeads: 2, g: 2, n: 33, rot: true, residual: 64},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 1, g: 1, n: 64, residual: 64},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 3, g: 2, n: 97, smooth: true, rot: true, residual: 40},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 130, residual: 64, rewind: 100},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 2000, window: 30, residual: 64, smooth: true},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 1, g: 4, n: 1500, residual: 1024, rot: true},
		{typ: kv.Q8, gs: 32, d: 128, kvHeads: 2, g: 4, n: 500, smooth: true, residual: 64},
		{typ: kv.Q8, gs: 64, d: 256, kvHeads: 1, g: 8, n: 20, rot: true, residual: 20},
		{typ: kv.Q8, gs: 32, d: 64, kvHeads: 2, g: 1, n: 77, smooth: true, rot: true, residual: 1},
		// Head dims that are not powers of two (V lanes that do not fill a
		// simdgroup), rotated by kv.Rotation's general transform: P·m =
		// 32·3, 64·3, 16·5, 32·7, 8·3.
		{typ: kv.Q4, gs: 32, d: 96, kvHeads: 2, g: 4, n: 700, smooth: true, rot: true, residual: 64},
		{typ: kv.Q4, gs: 64, d: 192, kvHeads: 1, g: 8, n: 300, rot: true},
		{typ: kv.Q8, gs: 32, d: 96, kvHeads: 3, g: 2, n: 90, window: 50, rot: true, residual: 16},
		{typ: kv.Q4, gs: 32, d: 224, kvHeads: 1, g: 2, n: 65, smooth: true, rot: true},
		{typ: kv.F16, d: 80, kvHeads: 2, g: 2, n: 300, rot: true},
		{typ: kv.F16, d: 24, kvHeads: 1, g: 1, n: 40, rot: true},
		{typ: kv.Q8, gs: 64, d: 192, kvHeads: 2, g: 1, n: 1000, window: 700, smooth: true},
		// Sliding-window rings (Gemma's local layers): the window's
		// positions wrap inside the ring (n not a multiple of it), wrap
		// inside a 64-token block and inside a split, the residual window
		// capped at the ring or shorter than it, n just past the window.
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 1000, window: 300, smooth: true, rot: true, residual: 64, ring: true},
		{typ: kv.Q4, gs: 64, d: 256, kvHeads: 1, g: 8, n: 213, window: 100, residual: 128, ring: true},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 2, n: 4000, window: 1024, rot: true, ring: true},
		{typ: kv.Q8, gs: 32, d: 128, kvHeads: 2, g: 2, n: 130, window: 40, smooth: true, residual: 16, ring: true},
		{typ: kv.Q8, gs: 32, d: 96, kvHeads: 1, g: 4, n: 65, window: 64, rot: true, ring: true},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 1, n: 777, window: 512, ring: true},
		// Head dims past 256 (Gemma 4's global layers: 512): a lane takes
		// two words of a token in V, a threadgroup at most 4 query heads;
		// 16 and 8 metadata groups a head; V lanes that do not fill a
		// simdgroup (384: 24, 272: 17).
		{typ: kv.Q4, gs: 32, d: 512, kvHeads: 1, g: 8, n: 700, smooth: true},
		{typ: kv.Q4, gs: 64, d: 512, kvHeads: 2, g: 2, n: 300, window: 100, residual: 64},
		{typ: kv.Q8, gs: 32, d: 512, kvHeads: 1, g: 4, n: 150, smooth: true, residual: 32},
		{typ: kv.F16, d: 512, kvHeads: 2, g: 1, n: 2000},
		{typ: kv.F16, d: 512, kvHeads: 1, g: 2, n: 130, window: 64, ring: true},
		{typ: kv.Q4, gs: 32, d: 384, kvHeads: 1, g: 3, n: 90, residual: 16},
		{typ: kv.F16, d: 272, kvHeads: 1, g: 2, n: 40},
		// Few splits on a small GPU: each simdgroup runs several 64-token
		// blocks a split (8, 3, 5, 2 and 2 here), so the online softmax
		// rescales what it has summed (l and o by 2^(m_old - m_new)).
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 4096, cores: 1},
		{typ: kv.Q8, gs: 32, d: 64, kvHeads: 1, g: 8, n: 3000, cores: 1},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 2, n: 2500, cores: 1},
		{typ: kv.Q4, gs: 64, d: 256, kvHeads: 1, g: 2, n: 1100, smooth: true, rot: true, cores: 1},
		{typ: kv.Q4, gs: 32, d: 512, kvHeads: 1, g: 4, n: 1200, cores: 1},
	}
	for _, c := range cases {
		ctx := c.n + r.IntN(3)
		if c.rewind > 0 {
			ctx = c.n + 40
		}
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		width := p.Heads * p.HeadDim
		q := attnRows(r, 1, p.Heads, p.HeadDim, false)
		want := make([]float32, width)
		pool := parallel.NewPool(2)
		ws := attention.NewWorkspace(p, f.cache.Config().Ctx, 1, 2, nil)
		if err := attention.Decode(pool, ws, want, q, f.cache, 0, c.n, p); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		a := backendAttention(p)
		for _, k := range attnKernels {
			for _, o := range orders {
				name, tol := fmt.Sprintf("%v_%v%s", c, o, k.suffix), k.scale*attnDecodeTol
				t.Run(name, func(t *testing.T) {
					enc := encoder.New(d, l)
					defer enc.Close()
					enc.SetCores(c.cores)
					enc.SetAttnKernel(k.kernel)
					out := region(t, d, make([]byte, 4*width))
					wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, 1)))
					enc.AttendDecode(out, region(t, d, f32Bytes(q)), &f.layer, c.n, a, wsr)
					runEncoded(t, d, o, enc)
					attnCompare(t, "out", f32s(out.Buf.Bytes()), want, p.HeadDim, tol)
				})
			}
		}
	}
	t.Logf("%d cases in both orders: %v", len(cases), time.Since(start).Round(time.Millisecond))
}

// The optional score export of kernel_attn_decode_<kv>: each query head's
// q·k·scale for every visible position, against float64 dot products with
// the dequantized keys in the original space (kv.LayerView.Dequantize, which
// undoes smoothing and rotation). Tolerance: 2e-5 of the largest |score|
// (float32 sums of D products).
func TestAttnDecodeScores(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(53, 54))
	for _, c := range []attnCase{
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 700, window: 300, smooth: true, rot: true, scoresStride: 710},
		{typ: kv.Q8, gs: 64, d: 64, kvHeads: 1, g: 2, n: 40, scoresStride: 40},
		{typ: kv.F16, d: 256, kvHeads: 2, g: 1, n: 33, scoresStride: 64},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 2, n: 150, smooth: true, rot: true, scoresStride: 150, residual: 64},
		{typ: kv.Q4, gs: 32, d: 96, kvHeads: 1, g: 4, n: 120, rot: true, scoresStride: 128, residual: 32},
		// Soft-capped: the export stays before the cap (as the CPU's),
		// with scores far past it.
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 150, smooth: true, rot: true, scoresStride: 150, residual: 64, softcap: 50, qmul: 10},
	} {
		f := newAttnFixture(t, d, r, c, c.n, c.n)
		p := c.params()
		width := p.Heads * p.HeadDim
		q := c.query(r, 1)
		lo := 0
		if c.window > 0 {
			lo = max(0, c.n-c.window)
		}
		lv := f.cache.Layer(0)
		want := make([]float32, p.Heads*c.scoresStride)
		key := make([]float32, c.d)
		tail := lv.TailStart(lo, c.n)
		for pos := lo; pos < c.n; pos++ {
			for kvh := 0; kvh < c.kvHeads; kvh++ {
				if pos >= tail {
					ringKey(key, lv, kvh, pos)
				} else {
					lv.Dequantize(key, &lv.K, kvh, pos)
				}
				for j := 0; j < c.g; j++ {
					h := kvh*c.g + j
					var s float64
					for i, x := range key {
						s += float64(q[h*c.d+i]) * float64(x)
					}
					want[h*c.scoresStride+pos] = float32(s * float64(p.Scale))
				}
			}
		}
		a := backendAttention(p)
		for _, k := range attnKernels {
			for _, o := range orders {
				t.Run(fmt.Sprintf("%v_%v%s", c, o, k.suffix), func(t *testing.T) {
					enc := encoder.New(d, l)
					defer enc.Close()
					enc.SetAttnKernel(k.kernel)
					out := region(t, d, make([]byte, 4*width))
					scores := region(t, d, make([]byte, 4*len(want)))
					wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, 1)))
					enc.AttendDecodeScores(out, region(t, d, f32Bytes(q)), &f.layer, c.n, a, wsr, scores, c.scoresStride)
					runEncoded(t, d, o, enc)
					attnCompare(t, "scores", f32s(scores.Buf.Bytes()), want, c.scoresStride, k.scale*2e-5)
				})
			}
		}
	}
}

// ringKey writes the residual window ring's copy of K at (kvh, pos) into
// key in the original space: rotation and smoothing undone.
func ringKey(key []float32, lv *kv.LayerView, kvh, pos int) {
	for i, h := range lv.TailRow(&lv.K, kvh, pos) {
		key[i] = half.ToFloat32(h)
	}
	if lv.Rot != nil {
		lv.Rot.Invert(key, key)
	}
	if lv.Lambda != nil {
		for i := range key {
			key[i] *= lv.Lambda[kvh*lv.HeadDim+i]
		}
	}
}

// kernel_attn_stage_f32 and kernel_attn_prefill_{q4,q8,f16} (through
// encoder.AttendPrefill) against engine/cpu/attention.Prefill. Tolerance:
// attnDecodeTol relative to the largest output (the staged rows are the
// CPU's bit for bit; the sums differ in order).
func TestAttnPrefill(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(55, 56))
	start := time.Now()
	cases := []attnCase{
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 100, rows: 40, smooth: true, rot: true},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 1, g: 1, n: 0, rows: 33},
		{typ: kv.Q4, gs: 32, d: 256, kvHeads: 1, g: 8, n: 70, rows: 3, window: 50, smooth: true},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 1000, rows: 2, window: 300, rot: true},
		{typ: kv.Q8, gs: 32, d: 256, kvHeads: 1, g: 2, n: 300, rows: 5, window: 64, smooth: true},
		{typ: kv.Q8, gs: 64, d: 64, kvHeads: 2, g: 1, n: 31, rows: 17, rot: true},
		{typ: kv.F16, d: 64, kvHeads: 1, g: 8, n: 50, rows: 20, window: 30},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 2, n: 33, rows: 9, rot: true},
		// The residual window: 1, 64, longer than and as long as the
		// prefix, one a rewind shortened, one a sliding window cuts into
		// (rows that see only the ring, and rows that see codes too).
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 100, rows: 40, smooth: true, rot: true, residual: 64},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 1, g: 1, n: 50, rows: 33, residual: 1},
		{typ: kv.Q4, gs: 32, d: 256, kvHeads: 1, g: 8, n: 70, rows: 3, smooth: true, residual: 100},
		{typ: kv.Q4, gs: 32, d: 64, kvHeads: 2, g: 2, n: 64, rows: 5, rot: true, residual: 64},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 130, rows: 4, residual: 64, rewind: 110},
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 1, g: 2, n: 300, rows: 30, window: 50, smooth: true, residual: 32},
		{typ: kv.Q8, gs: 32, d: 256, kvHeads: 1, g: 2, n: 300, rows: 5, window: 64, smooth: true, residual: 64},
		{typ: kv.Q8, gs: 64, d: 64, kvHeads: 2, g: 1, n: 31, rows: 17, rot: true, residual: 16},
		// Head dims that are not powers of two, rotated.
		{typ: kv.Q4, gs: 32, d: 96, kvHeads: 2, g: 4, n: 80, rows: 20, smooth: true, rot: true, residual: 32},
		{typ: kv.Q8, gs: 64, d: 192, kvHeads: 1, g: 2, n: 40, rows: 9, window: 30, rot: true},
		{typ: kv.F16, d: 80, kvHeads: 1, g: 8, n: 33, rows: 17, rot: true},
		{typ: kv.Q4, gs: 32, d: 160, kvHeads: 2, g: 1, n: 10, rows: 3, rot: true, residual: 64},
		// Sliding-window rings: a prefix that wraps in the ring, a batch
		// longer than the window (late rows see no prefix), the residual
		// window capped at the ring.
		{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 300, rows: 20, window: 100, smooth: true, rot: true, residual: 32, ring: true},
		{typ: kv.Q4, gs: 64, d: 64, kvHeads: 1, g: 2, n: 90, rows: 50, window: 40, residual: 64, ring: true},
		{typ: kv.Q8, gs: 32, d: 256, kvHeads: 1, g: 2, n: 150, rows: 7, window: 64, rot: true, ring: true},
		{typ: kv.F16, d: 128, kvHeads: 2, g: 2, n: 77, rows: 9, window: 30, ring: true},
		// Head dims past 256.
		{typ: kv.Q4, gs: 32, d: 512, kvHeads: 1, g: 8, n: 60, rows: 12, smooth: true, residual: 16},
		{typ: kv.Q8, gs: 64, d: 512, kvHeads: 2, g: 2, n: 30, rows: 9, window: 20},
		{typ: kv.F16, d: 512, kvHeads: 1, g: 4, n: 0, rows: 33},
		{typ: kv.F16, d: 384, kvHeads: 1, g: 2, n: 40, rows: 5, window: 16, ring: true},
	}
	for _, c := range cases {
		ctx := c.n + c.rows + 1
		if c.rewind > 0 {
			ctx += 40
		}
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		qw := p.Heads * p.HeadDim
		q := attnRows(r, c.rows, p.Heads, p.HeadDim, false)
		k := attnRows(r, c.rows, p.KVHeads, p.HeadDim, true)
		v := attnRows(r, c.rows, p.KVHeads, p.HeadDim, false)
		want := make([]float32, c.rows*qw)
		pool := parallel.NewPool(2)
		ws := attention.NewWorkspace(p, ctx, c.rows, 2, nil)
		if err := attention.Prefill(pool, ws, want, q, k, v, c.rows, f.cache, 0, c.n, p); err != nil {
			t.Fatal(err)
		}
		pool.Close()
		a := backendAttention(p)
		for _, o := range orders {
			t.Run(fmt.Sprintf("%v_%v", c, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				out := region(t, d, make([]byte, 4*c.rows*qw))
				wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, c.rows)))
				enc.AttendPrefill(out, region(t, d, f32Bytes(q)), region(t, d, f32Bytes(k)), region(t, d, f32Bytes(v)),
					&f.layer, c.n, c.rows, a, wsr)
				runEncoded(t, d, o, enc)
				attnCompare(t, "out", f32s(out.Buf.Bytes()), want, qw, attnDecodeTol)
			})
		}
	}
	t.Logf("%d cases in both orders: %v", len(cases), time.Since(start).Round(time.Millisecond))
}

// Logit soft-capping (attn_softcap) in kernel_attn_decode_* and
// kernel_attn_prefill_* against engine/cpu/attention with the same Softcap,
// cap 50 and queries scaled so that scores reach several times the cap:
// decode and prefill for q4, q8 and f16, through the codes, the residual
// window's f16 ring and the staged new rows, Gemma 2's head dim 256 and a
// sliding window. Each case also checks that the uncapped result is far
// outside the tolerance (a kernel without the cap fails it). Tolerance:
// attnDecodeTol relative to the largest output (the worst seen is
// 3.3e-6).
func TestAttnSoftcap(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(57, 58))
	cap := func(c attnCase) attnCase { c.softcap, c.qmul = 50, 10; return c }
	decode := []attnCase{
		cap(attnCase{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 4, n: 700, smooth: true, rot: true}),
		cap(attnCase{typ: kv.Q4, gs: 32, d: 256, kvHeads: 2, g: 2, n: 300, window: 100, rot: true, residual: 64}),
		cap(attnCase{typ: kv.Q8, gs: 32, d: 128, kvHeads: 1, g: 4, n: 200, smooth: true, residual: 64}),
		cap(attnCase{typ: kv.F16, d: 256, kvHeads: 2, g: 2, n: 333}),
	}
	prefill := []attnCase{
		cap(attnCase{typ: kv.Q4, gs: 32, d: 128, kvHeads: 2, g: 2, n: 100, rows: 12, smooth: true, rot: true, residual: 64}),
		cap(attnCase{typ: kv.Q8, gs: 64, d: 256, kvHeads: 1, g: 2, n: 70, rows: 9, window: 40}),
		cap(attnCase{typ: kv.F16, d: 256, kvHeads: 2, g: 2, n: 20, rows: 17}),
	}
	// uncapped must differ from capped by far more than the tolerance.
	farApart := func(t *testing.T, capped, uncapped []float32) {
		t.Helper()
		var scale, diff float64
		for i, v := range capped {
			scale = math.Max(scale, math.Abs(float64(v)))
			diff = math.Max(diff, math.Abs(float64(v-uncapped[i])))
		}
		if !(diff > 20*attnDecodeTol*scale) {
			t.Fatalf("the cap changes the output by %.2g of max|out| only: the test would not see it missing", diff/scale)
		}
		t.Logf("uncapped differs by %.2g of max|out|", diff/scale)
	}
	for _, c := range decode {
		ctx := c.n + 3
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		width := p.Heads * p.HeadDim
		q := c.query(r, 1)
		ref := func(p attention.Params) []float32 {
			out := make([]float32, width)
			pool := parallel.NewPool(2)
			defer pool.Close()
			ws := attention.NewWorkspace(p, ctx, 1, 2, nil)
			if err := attention.Decode(pool, ws, out, q, f.cache, 0, c.n, p); err != nil {
				t.Fatal(err)
			}
			return out
		}
		want := ref(p)
		plain := p
		plain.Softcap = 0
		t.Run(fmt.Sprintf("decode_%v", c), func(t *testing.T) { farApart(t, want, ref(plain)) })
		a := backendAttention(p)
		for _, o := range orders {
			t.Run(fmt.Sprintf("decode_%v_%v", c, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				out := region(t, d, make([]byte, 4*width))
				wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, 1)))
				enc.AttendDecode(out, region(t, d, f32Bytes(q)), &f.layer, c.n, a, wsr)
				runEncoded(t, d, o, enc)
				attnCompare(t, "out", f32s(out.Buf.Bytes()), want, p.HeadDim, attnDecodeTol)
			})
		}
	}
	for _, c := range prefill {
		ctx := c.n + c.rows + 1
		f := newAttnFixture(t, d, r, c, ctx, c.n)
		p := c.params()
		qw := p.Heads * p.HeadDim
		q := c.query(r, c.rows)
		k := attnRows(r, c.rows, p.KVHeads, p.HeadDim, true)
		v := attnRows(r, c.rows, p.KVHeads, p.HeadDim, false)
		ref := func(p attention.Params) []float32 {
			out := make([]float32, c.rows*qw)
			pool := parallel.NewPool(2)
			defer pool.Close()
			ws := attention.NewWorkspace(p, ctx, c.rows, 2, nil)
			if err := attention.Prefill(pool, ws, out, q, k, v, c.rows, f.cache, 0, c.n, p); err != nil {
				t.Fatal(err)
			}
			return out
		}
		want := ref(p)
		plain := p
		plain.Softcap = 0
		t.Run(fmt.Sprintf("prefill_%v", c), func(t *testing.T) { farApart(t, want, ref(plain)) })
		a := backendAttention(p)
		for _, o := range orders {
			t.Run(fmt.Sprintf("prefill_%v_%v", c, o), func(t *testing.T) {
				enc := encoder.New(d, l)
				defer enc.Close()
				out := region(t, d, make([]byte, 4*c.rows*qw))
				wsr := region(t, d, make([]byte, encoder.WorkspaceBytes(f.layer.Cfg, p.Heads, c.rows)))
				enc.AttendPrefill(out, region(t, d, f32Bytes(q)), region(t, d, f32Bytes(k)), region(t, d, f32Bytes(v)),
					&f.layer, c.n, c.rows, a, wsr)
				runEncoded(t, d, o, enc)
				attnCompare(t, "out", f32s(out.Buf.Bytes()), want, qw, attnDecodeTol)
			})
		}
	}
}
