//go:build linux

package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/metal/internal/emulator"
)

// AttendDecode and AttendPrefill on the emulator against the CPU backend's
// ops of the same names, on caches both filled with the same KVSetSmoothing
// and KVStore calls (stores: positions and rows of each, a rewind among
// them), so that the encoder's record of what the residual window's ring
// holds is the one under test. Tolerance: 2e-5 of the largest output
// (float32 sums in other orders; the kernels' own tests in metal/shaders
// cover the shapes).
func TestEncoderAttention(t *testing.T) {
	dev, e := emuEncoder(t)
	r := rand.New(rand.NewPCG(61, 62))
	for _, c := range []struct {
		cfg            kv.Config
		heads, n, rows int
		window         int
		smooth         bool
		prefill        bool
		past           int
		stores         [][2]int // {pos, rows} of each store (nil: one of the n or past positions)
		ring           bool     // the layer keeps its window in a ring (kv.Config.LayerWindow)
	}{
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 64, Ctx: 320, Smooth: true}, heads: 4, n: 300, smooth: true},
		{cfg: kv.Config{Type: kv.Q8, GroupSize: 64, KVHeads: 1, HeadDim: 128, Ctx: 64, Rotate: true}, heads: 1, n: 40, window: 16},
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 128, Ctx: 80, Rotate: true, Smooth: true}, heads: 8, prefill: true, past: 40, rows: 20, smooth: true},
		{cfg: kv.Config{Type: kv.F16, KVHeads: 1, HeadDim: 64, Ctx: 40}, heads: 2, prefill: true, past: 0, rows: 17, window: 8},
		// The residual window: filled by a prompt batch and decode rows,
		// read by decode and prefill, with a sliding window, and after a
		// rewind that leaves the ring a shorter run.
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 128, Ctx: 320, Smooth: true, Rotate: true, Residual: 64}, heads: 8, n: 300, smooth: true,
			stores: [][2]int{{0, 250}, {250, 1}, {251, 1}, {252, 48}}},
		{cfg: kv.Config{Type: kv.Q8, GroupSize: 32, KVHeads: 1, HeadDim: 64, Ctx: 100, Residual: 16}, heads: 2, n: 90, window: 40},
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 64, KVHeads: 2, HeadDim: 256, Ctx: 200, Residual: 64}, heads: 4, n: 120,
			stores: [][2]int{{0, 150}, {110, 10}}},
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 64, Ctx: 200, Smooth: true, Residual: 32}, heads: 4, prefill: true, past: 100, rows: 30, smooth: true},
		{cfg: kv.Config{Type: kv.Q8, GroupSize: 64, KVHeads: 1, HeadDim: 128, Ctx: 200, Rotate: true, Residual: 64}, heads: 1, prefill: true, past: 90, rows: 8, window: 70,
			stores: [][2]int{{0, 120}, {85, 5}}},
		// A head dim that is not a power of two, rotated (P 32, m 3).
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 96, Ctx: 300, Smooth: true, Rotate: true, Residual: 64}, heads: 8, n: 280, smooth: true},
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 1, HeadDim: 96, Ctx: 100, Rotate: true, Residual: 16}, heads: 4, prefill: true, past: 50, rows: 24},
		// Sliding-window rings: filled by batches longer than the window,
		// decode rows that wrap, a rewind inside the window; read by
		// decode and by prefill.
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 128, Ctx: 400, Smooth: true, Rotate: true, Residual: 32}, heads: 8, n: 312, window: 100, smooth: true, ring: true,
			stores: [][2]int{{0, 250}, {250, 1}, {251, 1}, {252, 60}}},
		{cfg: kv.Config{Type: kv.Q8, GroupSize: 32, KVHeads: 1, HeadDim: 64, Ctx: 200, Residual: 64}, heads: 2, n: 100, window: 40, ring: true,
			stores: [][2]int{{0, 100}, {95, 5}}},
		{cfg: kv.Config{Type: kv.F16, KVHeads: 2, HeadDim: 64, Ctx: 100}, heads: 4, n: 77, window: 30, ring: true},
		{cfg: kv.Config{Type: kv.Q4, GroupSize: 64, KVHeads: 2, HeadDim: 128, Ctx: 300, Residual: 16}, heads: 4, prefill: true, past: 150, rows: 40, window: 64, ring: true,
			stores: [][2]int{{0, 140}, {140, 10}}},
		{cfg: kv.Config{Type: kv.Q8, GroupSize: 32, KVHeads: 1, HeadDim: 128, Ctx: 200, Rotate: true, Residual: 64}, heads: 2, prefill: true, past: 70, rows: 20, window: 50, ring: true},
	} {
		c.cfg.Layers = 1
		if c.ring {
			c.cfg.LayerWindow = []int{c.window}
		}
		name := fmt.Sprintf("%v_d%d_h%d_kv%d_n%d_past%d_rows%d_window%d_res%d_ring%d", c.cfg.Type, c.cfg.HeadDim, c.heads, c.cfg.KVHeads, c.n, c.past, c.rows, c.window, c.cfg.Window(), c.cfg.LayerRing(0))
		t.Run(name, func(t *testing.T) {
			cb := cpu.New(2)
			defer cb.Close()
			kvw, d := c.cfg.KVHeads*c.cfg.HeadDim, c.cfg.HeadDim
			batch := max(1, c.rows)
			kc, err := cb.NewKVCache(c.cfg, c.heads, batch)
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			layer := opsLayer(t, dev, c.cfg)
			if c.smooth {
				lambda := make([]float32, kvw)
				for i := range lambda {
					lambda[i] = float32(math.Ldexp(1, r.IntN(5)-2))
				}
				cb.KVSetSmoothing(kc, 0, lambda)
				e.KVSetSmoothing(layer, lambda)
			}
			stores := c.stores
			if stored := map[bool]int{false: c.n, true: c.past}[c.prefill]; stores == nil && stored > 0 {
				stores = [][2]int{{0, stored}}
			}
			for _, s := range stores {
				k, v := randomFloats(r, s[1]*kvw, 2), randomFloats(r, s[1]*kvw, 2)
				cb.KVStore(kc, 0, cpuTensor(cb, k), cpuTensor(cb, v), s[0], s[1])
				e.KVStore(layer, devFloats(t, dev, k, 0), devFloats(t, dev, v, 0), s[0], s[1])
			}
			if err := cb.Sync(); err != nil {
				t.Fatal(err)
			}
			runEncoded(t, dev, e, emulator.Forward)
			comparePlanes(t, cb, kc, 0, layer)
			a := &backend.Attention{Heads: c.heads, KVHeads: c.cfg.KVHeads, HeadDim: d,
				Scale: float32(1 / math.Sqrt(float64(d))), Window: c.window}
			rows := max(1, c.rows)
			q := randomFloats(r, rows*c.heads*d, 2)
			want := make([]float32, len(q))
			out := devBytes(t, dev, make([]byte, 4*len(q)), 0)
			ws := devBytes(t, dev, make([]byte, WorkspaceBytes(c.cfg, c.heads, batch)), 0)
			if c.prefill {
				k, v := randomFloats(r, rows*kvw, 2), randomFloats(r, rows*kvw, 2)
				wt := cb.Alloc(len(q))
				cb.AttendPrefill(wt, cpuTensor(cb, q), cpuTensor(cb, k), cpuTensor(cb, v), kc, 0, c.past, rows, a)
				if err := cb.Sync(); err != nil {
					t.Fatal(err)
				}
				cb.Read(want, wt, 0)
				e.AttendPrefill(out, devFloats(t, dev, q, 0), devFloats(t, dev, k, 0),
					devFloats(t, dev, v, 0), layer, c.past, rows, a, ws)
			} else {
				wt := cb.Alloc(len(q))
				cb.AttendDecode(wt, cpuTensor(cb, q), kc, 0, c.n, a)
				if err := cb.Sync(); err != nil {
					t.Fatal(err)
				}
				cb.Read(want, wt, 0)
				e.AttendDecode(out, devFloats(t, dev, q, 0), layer, c.n, a, ws)
			}
			runEncoded(t, dev, e, emulator.Forward)
			got := readFloats(out)
			var scale, worst float64
			for i := range want {
				scale = math.Max(scale, math.Abs(float64(want[i])))
				worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
			}
			if !(worst <= 2e-5*scale) {
				t.Fatalf("error %.3g of max %.3g", worst, scale)
			}
		})
	}
}

// Arguments that break the contract are encoding errors, not panics, and
// encode nothing.
func TestEncoderAttentionContract(t *testing.T) {
	dev, e := emuEncoder(t)
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 64}
	plane := cfg.KVHeads * cfg.Ctx * kv.BytesPerTokenHead(cfg.Type, cfg.HeadDim, cfg.GroupSize)
	layer := &KVLayer{Cfg: cfg, K: devBytes(t, dev, make([]byte, plane), 0), V: devBytes(t, dev, make([]byte, plane), 0)}
	ws := devBytes(t, dev, make([]byte, WorkspaceBytes(cfg, 4, 8)), 0)
	buf := devBytes(t, dev, make([]byte, 4*16*4*64), 0)
	good := backend.Attention{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	ringCfg := cfg
	ringCfg.LayerWindow = []int{16}
	ringLayer := &KVLayer{Cfg: ringCfg}
	ringLayer.K, ringLayer.V = devBytes(t, dev, make([]byte, ringLayer.PlaneBytes()), 0), devBytes(t, dev, make([]byte, ringLayer.PlaneBytes()), 0)
	for _, c := range []struct {
		want string
		run  func(a *backend.Attention)
	}{
		{"positions outside", func(a *backend.Attention) { e.AttendDecode(buf, buf, layer, 65, a, ws) }},
		{"positions outside", func(a *backend.Attention) { e.AttendDecode(buf, buf, layer, 0, a, ws) }},
		{"kv heads", func(a *backend.Attention) { a.KVHeads, a.Heads = 1, 1; e.AttendDecode(buf, buf, layer, 5, a, ws) }},
		{"not a multiple", func(a *backend.Attention) { a.Heads = 3; e.AttendDecode(buf, buf, layer, 5, a, ws) }},
		{"scale", func(a *backend.Attention) { a.Scale = 0; e.AttendDecode(buf, buf, layer, 5, a, ws) }},
		{"workspace", func(a *backend.Attention) { e.AttendDecode(buf, buf, layer, 5, a, ws.Sub(0, 16)) }},
		{"workspace", func(a *backend.Attention) { e.AttendPrefill(buf, buf, buf, buf, layer, 0, 9, a, ws) }},
		{"q and out", func(a *backend.Attention) { e.AttendPrefill(buf, buf.Sub(0, 64), buf, buf, layer, 0, 8, a, ws) }},
		{"positions", func(a *backend.Attention) { e.AttendPrefill(buf, buf, buf, buf, layer, 60, 8, a, ws) }},
		{"scores", func(a *backend.Attention) { e.AttendDecodeScores(buf, buf, layer, 5, a, ws, buf, 4) }},
		// A sliding-window layer's ring of 16 slots serves windows up to 16.
		{"ring of 16 slots", func(a *backend.Attention) { e.AttendDecode(buf, buf, ringLayer, 30, a, ws) }},
		{"ring of 16 slots", func(a *backend.Attention) { a.Window = 17; e.AttendDecode(buf, buf, ringLayer, 30, a, ws) }},
		{"ring of 16 slots", func(a *backend.Attention) {
			a.Window = 20
			e.AttendPrefill(buf, buf, buf, buf, ringLayer, 30, 2, a, ws)
		}},
	} {
		a := good
		wantRefused(t, e, c.want, c.want, func() { c.run(&a) })
	}
	// The workspace holds the partials of the most splits AttendDecode uses.
	for _, ctx := range []int{1, 255, 256, 4096, 1 << 17} {
		cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 128, Ctx: ctx}
		s := attnSplits(ctx, 1, attnMaxSplitsFor(ctx), attnTargetTGs)
		if need := s * 8 * (128 + 2) * 4; WorkspaceBytes(cfg, 8, 0) < need {
			t.Errorf("ctx %d: workspace %d bytes, %d splits need %d", ctx, WorkspaceBytes(cfg, 8, 0), s, need)
		}
	}
}

// DecodeGridFor sizes decode's splits from the GPU's core count: one wave
// of attnTGsPerCore threadgroups a core, chunks of whole 64-token blocks,
// at least attnMinChunk positions a split, at most the workspace's splits.
func TestDecodeGridFor(t *testing.T) {
	for _, c := range []struct {
		cores, heads, kvHeads, d, n int
		hg, splits                  int
	}{
		{0, 64, 8, 128, 128 << 10, 8, 32},   // unknown: 256 threadgroups
		{132, 64, 8, 128, 128 << 10, 8, 33}, // an H200: 264
		{10, 64, 8, 128, 128 << 10, 8, 3},   // an M1 Pro's 10 cores: 20
		{132, 64, 8, 128, 8 << 10, 8, 32},   // 256 positions a split at least
		{1, 8, 2, 128, 4096, 4, 1},
		{40, 32, 8, 64, 4096, 4, 10},
		{40, 8, 1, 512, 1000, 4, 3}, // past 256: 4 heads a threadgroup
		{132, 64, 8, 128, 100, 8, 1},
	} {
		hg, s := DecodeGridFor(c.cores, c.heads, c.kvHeads, c.d, c.n, c.n)
		if hg != c.hg || s != c.splits {
			t.Errorf("%+v: hg %d, %d splits", c, hg, s)
		}
		if chunk := attnChunk(c.n, s); chunk%attnBlock != 0 || chunk*s < c.n || chunk*(s-1) >= c.n {
			t.Errorf("%+v: %d splits of %d positions", c, s, chunk)
		}
	}
	// The default grid is DecodeGridFor's with no core count.
	if hg, s := DecodeGrid(64, 8, 128, 1<<17, 1<<17); hg != 8 || s != 32 {
		t.Errorf("DecodeGrid: hg %d, %d splits", hg, s)
	}
}
