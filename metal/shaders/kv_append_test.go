//go:build linux

package shaders

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// kvAppendSigns are the rotation's constants for head dim d (signs, then
// the block mixing Q_m), as the encoder uploads them.
func kvAppendSigns(t *testing.T, d int) []float32 {
	x, err := encoder.RotationConstants(d)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// kvAppendRows are rows of K or V as attention produces them: normal
// values, a few outlier channels per head (what smoothing is for), and now
// and then a value far beyond fp16's range or a constant group.
func kvAppendRows(r *rand.Rand, rows, kvHeads, d int) []float32 {
	x := make([]float32, rows*kvHeads*d)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%d == 3 || i%d == d/2+1 {
			x[i] *= 40
		}
	}
	if len(x) > 2*d {
		x[r.IntN(len(x))] = 1e6
		x[r.IntN(len(x))] = -7e4
		for i := d; i < d+8; i++ {
			x[i] = 0.25 // a constant run
		}
	}
	return x
}

// kernel_kv_append_{f16,q8,q4} against engine/kv Cache.Append: the planes'
// bytes, codes, metadata and the residual window's f16 ring (windows of 0,
// 1, 64, more than and as many as the batch's rows), must be equal. Tolerance: none (the kernel
// computes the CPU's operations in the same order; a device whose division
// is not correctly rounded may move a code by one at a rounding tie).
func TestKVAppend(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(41, 42))
	type kcase struct {
		typ             kv.Type
		gs, kvHeads, hd int
		ctx, pos, rows  int
		smooth, rotate  bool
		threads         int
		residual        int
	}
	var cases []kcase
	// Every type, group size, smoothing and rotation over the head dims,
	// at a few heads, batch sizes and positions.
	i := 0
	for _, typ := range kv.Types {
		for _, hd := range []int{64, 128, 256} {
			for _, gs := range []int{32, 64} {
				if typ == kv.F16 && gs == 64 {
					continue
				}
				for _, sr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					heads := []int{1, 2, 4, 8, 32}[i%5]
					rows := []int{1, 33, 7, 16, 2}[i%5]
					ctx := []int{64, 128, 4096}[i%3]
					residual := []int{0, 1, 64, rows + 3, rows}[(i/3)%5]
					cases = append(cases, kcase{typ, gs, heads, hd, ctx, ctx - rows - i%3, rows, sr[0], sr[1], []int{256, 128, 32, 1024}[i%4], residual})
					i++
				}
			}
		}
	}
	// Head dims that are not powers of two, rotated (P·m: 32·3, 16·5, 64·3,
	// 8·3, 32·7, 8·31) and not, and the last position of a long context.
	cases = append(cases,
		kcase{kv.Q4, 32, 3, 96, 60, 7, 20, true, true, 128, 16},
		kcase{kv.Q8, 32, 2, 96, 30, 0, 30, false, true, 64, 0},
		kcase{kv.F16, 32, 5, 80, 20, 3, 11, false, true, 96, 0},
		kcase{kv.Q4, 64, 4, 192, 40, 30, 9, true, true, 256, 64},
		kcase{kv.Q8, 64, 1, 192, 10, 9, 1, false, true, 32, 0},
		kcase{kv.F16, 32, 7, 24, 12, 2, 10, false, true, 64, 0},
		kcase{kv.Q4, 32, 2, 224, 33, 1, 32, true, true, 1024, 8},
		kcase{kv.F16, 32, 3, 248, 9, 0, 9, true, true, 32, 0},
		// Head vectors wider than a simdgroup (no rotation): one thread a
		// chunk across simdgroups.
		kcase{kv.Q4, 32, 3, 512, 20, 4, 7, true, false, 128, 5},
		kcase{kv.Q8, 64, 1, 320, 6, 0, 6, false, false, 64, 0},
		kcase{kv.Q4, 32, 2, 96, 50, 3, 5, true, false, 64, 4},
		kcase{kv.Q8, 64, 3, 192, 40, 39, 1, true, false, 96, 7},
		kcase{kv.F16, 32, 5, 80, 20, 0, 20, false, false, 128, 0},
		kcase{kv.Q4, 64, 8, 128, 4096, 4095, 1, true, true, 256, 64},
		kcase{kv.Q4, 32, 32, 128, 4096, 4064, 32, true, true, 1024, 0},
		// A ring that wraps inside the batch, and one as long as the
		// context (odd, so that the ring is only 4-byte aligned).
		kcase{kv.Q4, 64, 3, 64, 101, 37, 40, true, true, 256, 24},
		kcase{kv.Q8, 32, 1, 64, 9, 0, 9, false, true, 32, 9},
	)
	for _, c := range cases {
		cfg := kv.Config{Type: c.typ, GroupSize: c.gs, Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, Ctx: c.ctx, Rotate: c.rotate, Smooth: c.smooth, Residual: c.residual}
		if c.typ == kv.F16 {
			cfg.GroupSize = kv.DefaultGroupSize
		}
		cache, err := kv.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		lambda := make([]float32, c.kvHeads*c.hd)
		for i := range lambda {
			lambda[i] = float32(math.Ldexp(1, r.IntN(9)-4))
		}
		smooth := c.smooth && cfg.Smooths()
		if err := cache.SetLambda(0, lambda); err != nil {
			t.Fatal(err)
		}
		kr, vr := kvAppendRows(r, c.rows, c.kvHeads, c.hd), kvAppendRows(r, c.rows, c.kvHeads, c.hd)
		lv := cache.Layer(0)
		// What the planes held before: the kernel must not touch it.
		before := make([]byte, len(lv.K.Raw))
		for i := range before {
			before[i] = byte(r.Uint32())
		}
		copy(lv.K.Raw, before)
		copy(lv.V.Raw, before)
		if err := cache.Append(0, c.pos, kr, vr, c.rows); err != nil {
			t.Fatal(err)
		}
		signs := make([]float32, c.hd)
		if c.rotate {
			signs = kvAppendSigns(t, c.hd)
		}
		codes := c.kvHeads * c.ctx * c.hd
		switch c.typ {
		case kv.Q4:
			codes /= 2
		case kv.F16:
			codes *= 2
		}
		p := pipeline(t, l, "kernel_kv_append_"+c.typ.String())
		w := cfg.Window()
		ring := encoder.KVLayer{Cfg: cfg}
		for _, o := range orders {
			name := fmt.Sprintf("%v_gs%d_heads%d_d%d_ctx%d_pos%d_rows%d_smooth%v_rotate%v_window%d_%v", c.typ, c.gs, c.kvHeads, c.hd, c.ctx, c.pos, c.rows, smooth, c.rotate, w, o)
			t.Run(name, func(t *testing.T) {
				kp, vp := buffer(t, d, before), buffer(t, d, before)
				n := c.rows * c.kvHeads * c.hd / 8
				vps, threads := kvAppendLayout(c.rows*c.kvHeads, c.hd)
				a := kvAppendArgs(c.hd, cfg.GroupSize, c.kvHeads, c.ctx, c.pos, n, smooth, c.rotate, vps, w, max(0, c.rows-w), codes, ring.RingOffset())
				run(t, d, o, device.Dispatch{
					Pipeline: p, Groups: [3]int{(threads + c.threads - 1) / c.threads, 2, 1}, Threads: [3]int{c.threads, 1, 1},
					Inline: []device.Inline{{Index: 0, Data: a}},
					Buffers: []device.Binding{
						{Index: 1, Buffer: buffer(t, d, f32Bytes(kr))}, {Index: 2, Buffer: buffer(t, d, f32Bytes(vr))},
						{Index: 3, Buffer: buffer(t, d, f32Bytes(lambda))}, {Index: 4, Buffer: buffer(t, d, f32Bytes(signs))},
						{Index: 5, Buffer: kp}, {Index: 6, Buffer: vp}, {Index: 7, Buffer: kp}, // no RoPE: 7 unread
					},
				})
				kvAppendCompare(t, "K", kp.Bytes(), lv.K.Raw, codes, ring.RingOffset())
				kvAppendCompare(t, "V", vp.Bytes(), lv.V.Raw, codes, ring.RingOffset())
			})
		}
	}
}

// kvAppendLayout is the encoder's: vps head vectors of d elements a
// simdgroup (0: one thread per chunk) and the threads the grid needs.
func kvAppendLayout(vecs, d int) (vps, threads int) {
	if d/8 > 32 {
		return 0, vecs * d / 8
	}
	vps = 32 / (d / 8)
	return vps, (vecs + vps - 1) / vps * 32
}

// kvAppendArgs packs kv_append_args (the ulongs last, from offset 48).
func kvAppendArgs(hd, gs, kvHeads, ctx, pos, n int, smooth, rotate bool, vps, window, ringFrom, meta, ring int) []byte {
	b := func(v bool) uint32 {
		if v {
			return 1
		}
		return 0
	}
	return encoder.KVAppendArgs{D: uint32(hd), GS: uint32(gs), KVHeads: uint32(kvHeads), Ctx: uint32(ctx), Pos: uint32(pos), N: uint32(n),
		Smooth: b(smooth), Rotate: b(rotate), Norm: float32(1 / math.Sqrt(float64(hd&-hd))),
		VPS: uint32(vps), Window: uint32(window), RingFrom: uint32(ringFrom), Meta: uint64(meta), Ring: uint64(ring), RopeMScale: 1}.Bytes()
}

func kvAppendCompare(t *testing.T, plane string, got, want []byte, codes, ring int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s plane of %d bytes, want %d", plane, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			where := "codes"
			switch {
			case i >= ring:
				where = "ring"
			case i >= codes:
				where = "metadata"
			}
			t.Fatalf("%s plane byte %d (%s): %#02x, want %#02x", plane, i, where, got[i], want[i])
		}
	}
}

// kernel_kv_append_{f16,q8,q4} on a sliding-window layer's ring
// (kv.Config.LayerWindow): position p goes to slot p mod window. The ring
// is first filled past a wrap by kv.Cache.Append (the device starts from
// the same bytes), then a batch of at most window rows (what the encoder
// dispatches) is stored across the wrap, with and without the residual
// window (capped at the ring). Tolerance: none, the planes' bytes are
// equal.
func TestKVAppendRing(t *testing.T) {
	d, l := emu(t)
	r := rand.New(rand.NewPCG(43, 44))
	type rcase struct {
		typ                     kv.Type
		gs, kvHeads, hd, window int
		ctx, first, pos, rows   int
		residual                int
		smooth, rotate          bool
	}
	cases := []rcase{
		{kv.Q4, 32, 2, 128, 24, 200, 40, 40, 20, 16, true, true},  // wraps inside the batch
		{kv.Q4, 64, 1, 256, 33, 100, 50, 50, 33, 64, false, true}, // a whole ring; residual capped at 33
		{kv.Q8, 32, 3, 64, 16, 80, 30, 30, 9, 0, true, false},
		{kv.Q8, 64, 2, 192, 40, 90, 70, 65, 12, 8, false, true}, // a rewind inside the ring
		{kv.F16, 32, 2, 96, 20, 60, 25, 25, 17, 0, false, true},
		{kv.F16, 32, 1, 64, 8, 30, 8, 8, 8, 0, false, false}, // the batch starts at slot 0
	}
	for _, c := range cases {
		cfg := kv.Config{Type: c.typ, GroupSize: c.gs, Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, Ctx: c.ctx,
			Rotate: c.rotate, Smooth: c.smooth, Residual: c.residual, LayerWindow: []int{c.window}}
		cache, err := kv.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		lambda := make([]float32, c.kvHeads*c.hd)
		for i := range lambda {
			lambda[i] = float32(math.Ldexp(1, r.IntN(9)-4))
		}
		smooth := c.smooth && cfg.Smooths()
		if err := cache.SetLambda(0, lambda); err != nil {
			t.Fatal(err)
		}
		if err := cache.Append(0, 0, kvAppendRows(r, c.first, c.kvHeads, c.hd), kvAppendRows(r, c.first, c.kvHeads, c.hd), c.first); err != nil {
			t.Fatal(err)
		}
		lv := cache.Layer(0)
		if lv.Ring != c.window {
			t.Fatalf("the CPU cache's ring is %d, want %d", lv.Ring, c.window)
		}
		before := bytes.Clone(lv.K.Raw)
		beforeV := bytes.Clone(lv.V.Raw)
		kr, vr := kvAppendRows(r, c.rows, c.kvHeads, c.hd), kvAppendRows(r, c.rows, c.kvHeads, c.hd)
		if err := cache.Append(0, c.pos, kr, vr, c.rows); err != nil {
			t.Fatal(err)
		}
		signs := make([]float32, c.hd)
		if c.rotate {
			signs = kvAppendSigns(t, c.hd)
		}
		layer := encoder.KVLayer{Cfg: cfg}
		if layer.Slots() != c.window || layer.PlaneBytes() != len(lv.K.Raw) {
			t.Fatalf("the device layer has %d slots and %d-byte planes, the CPU's %d and %d", layer.Slots(), layer.PlaneBytes(), c.window, len(lv.K.Raw))
		}
		p := pipeline(t, l, "kernel_kv_append_"+c.typ.String())
		w := layer.Residual()
		for _, o := range orders {
			t.Run(fmt.Sprintf("%v_gs%d_heads%d_d%d_ring%d_pos%d_rows%d_residual%d_%v", c.typ, c.gs, c.kvHeads, c.hd, c.window, c.pos, c.rows, w, o), func(t *testing.T) {
				kp, vp := buffer(t, d, before), buffer(t, d, beforeV)
				n := c.rows * c.kvHeads * c.hd / 8
				vps, threads := kvAppendLayout(c.rows*c.kvHeads, c.hd)
				a := kvAppendArgs(c.hd, cfg.GroupSize, c.kvHeads, c.window, c.pos, n, smooth, c.rotate, vps, w, max(0, c.rows-w), layer.CodesBytes(), layer.RingOffset())
				run(t, d, o, device.Dispatch{
					Pipeline: p, Groups: [3]int{(threads + 255) / 256, 2, 1}, Threads: [3]int{256, 1, 1},
					Inline: []device.Inline{{Index: 0, Data: a}},
					Buffers: []device.Binding{
						{Index: 1, Buffer: buffer(t, d, f32Bytes(kr))}, {Index: 2, Buffer: buffer(t, d, f32Bytes(vr))},
						{Index: 3, Buffer: buffer(t, d, f32Bytes(lambda))}, {Index: 4, Buffer: buffer(t, d, f32Bytes(signs))},
						{Index: 5, Buffer: kp}, {Index: 6, Buffer: vp}, {Index: 7, Buffer: kp}, // no RoPE: 7 unread
					},
				})
				kvAppendCompare(t, "K", kp.Bytes(), lv.K.Raw, layer.CodesBytes(), layer.RingOffset())
				kvAppendCompare(t, "V", vp.Bytes(), lv.V.Raw, layer.CodesBytes(), layer.RingOffset())
			})
		}
	}
}
