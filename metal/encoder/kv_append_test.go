//go:build linux

package encoder

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/metal/internal/emulator"
)

// opsLayer is one cache layer of cfg on the device, λ holding ones, as the
// metal backend makes it.
func opsLayer(t *testing.T, dev *emulator.Device, cfg kv.Config) *KVLayer {
	c := &KVLayer{Cfg: cfg}
	c.K = devBytes(t, dev, make([]byte, c.PlaneBytes()), 0)
	c.V = devBytes(t, dev, make([]byte, c.PlaneBytes()), 0)
	if cfg.Smooths() {
		ones := make([]float32, cfg.KVHeads*cfg.HeadDim)
		for i := range ones {
			ones[i] = 1
		}
		c.Lambda = devFloats(t, dev, ones, 0)
	}
	return c
}

func opsLambda(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(math.Ldexp(1, r.IntN(7)-3))
	}
	return l
}

// KVSetSmoothing and KVStore on the emulator against the CPU backend's
// (ReadKV): a prompt batch stored with λ1, decode rows after, then λ2 set
// and a row stored in the same command list (λ reaches the device in
// command order), a rewind (rows stored again at an earlier position), then
// smoothing turned off. Every type, smoothing and rotation, residual windows
// of 1, 16, 64 and 100 positions (q8, q4: the f16 ring is part of the
// planes), head dims 64 to 256 (96 and 192 rotated by the general
// transform). Tolerance: none, the planes' bytes are equal.
func TestEncoderKVStore(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(77, 78))
	i := 0
	for _, typ := range kv.Types {
		for _, sr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			hd := []int{64, 96, 128, 192, 256}[i%5]
			gs := 32
			if i%2 == 1 && hd%64 == 0 {
				gs = 64
			}
			cfg := kv.Config{Type: typ, GroupSize: gs, Layers: 2, KVHeads: []int{2, 8, 1}[i%3],
				HeadDim: hd, Ctx: 80, Smooth: sr[0], Rotate: sr[1], Residual: []int{16, 64, 1, 0, 100}[i%4]}
			i++
			for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
				t.Run(fmt.Sprintf("%v_gs%d_kvheads%d_d%d_smooth%v_rotate%v_window%d_%v", typ, cfg.GroupSize, cfg.KVHeads, cfg.HeadDim, cfg.Smooth, cfg.Rotate, cfg.Window(), o), func(t *testing.T) {
					cc, err := cb.NewKVCache(cfg, cfg.KVHeads, 64)
					if err != nil {
						t.Fatal(err)
					}
					defer cc.Close()
					const layer = 1
					c := opsLayer(t, dev, cfg)
					w := cfg.KVHeads * cfg.HeadDim
					l1, l2 := opsLambda(r, w), opsLambda(r, w)
					store := func(pos, rows int) {
						k, v := randomFloats(r, rows*w, 2), randomFloats(r, rows*w, 1)
						e.KVStore(c, devFloats(t, dev, k, 0), devFloats(t, dev, v, 0), pos, rows)
						cb.KVStore(cc, layer, cpuTensor(cb, k), cpuTensor(cb, v), pos, rows)
					}
					smooth := func(l []float32) {
						e.KVSetSmoothing(c, l)
						cb.KVSetSmoothing(cc, layer, l)
					}
					smooth(l1)
					store(0, 33)
					runEncoded(t, dev, e, o)
					store(33, 1)
					store(34, 1)
					smooth(l2)
					store(35, 2)
					runEncoded(t, dev, e, o)
					store(20, 3)
					smooth(nil)
					store(79, 1)
					runEncoded(t, dev, e, o)
					if c.Smoothed {
						t.Error("smoothing still on after KVSetSmoothing(nil)")
					}
					if err := cb.Sync(); err != nil {
						t.Fatal(err)
					}
					wk, wv := make([]byte, c.PlaneBytes()), make([]byte, c.PlaneBytes())
					if err := cb.ReadKV(cc, layer, wk, wv); err != nil {
						t.Fatal(err)
					}
					for _, p := range []struct {
						name      string
						got, want []byte
					}{{"K", c.K.Buf.Bytes()[:c.K.Len], wk}, {"V", c.V.Buf.Bytes()[:c.V.Len], wv}} {
						if !bytes.Equal(p.got, p.want) {
							for j := range p.want {
								if p.got[j] != p.want[j] {
									t.Fatalf("%s plane byte %d of %d (codes end at %d, the ring starts at %d): %#02x, want %#02x",
										p.name, j, len(p.want), c.CodesBytes(), c.RingOffset(), p.got[j], p.want[j])
								}
							}
						}
					}
				})
			}
		}
	}
}

// comparePlanes fails unless c's planes hold the bytes of layer l of the
// CPU backend's cache cc (ReadKV), naming the first byte that differs.
func comparePlanes(t *testing.T, cb *cpu.Backend, cc backend.KVCache, l int, c *KVLayer) {
	t.Helper()
	wk, wv := make([]byte, c.PlaneBytes()), make([]byte, c.PlaneBytes())
	if err := cb.ReadKV(cc, l, wk, wv); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name      string
		got, want []byte
	}{{"K", c.K.Buf.Bytes()[c.K.Off : c.K.Off+c.K.Len], wk}, {"V", c.V.Buf.Bytes()[c.V.Off : c.V.Off+c.V.Len], wv}} {
		if len(p.got) != len(p.want) {
			t.Fatalf("%s plane of %d bytes, the CPU's has %d", p.name, len(p.got), len(p.want))
		}
		for j := range p.want {
			if p.got[j] != p.want[j] {
				t.Fatalf("%s plane byte %d of %d (codes end at %d, the residual ring starts at %d): %#02x, want %#02x",
					p.name, j, len(p.want), c.CodesBytes(), c.RingOffset(), p.got[j], p.want[j])
			}
		}
	}
}

// KVStore on sliding-window layers (kv.Config.LayerWindow: a ring of
// window slots, position p at slot p mod window) against the CPU backend's
// (ReadKV): batches longer than the window (only their last window rows
// stay), decode rows that wrap, a batch across the wrap, a rewind inside
// the window; residual windows shorter than, capped at and absent from the
// ring; a global layer beside it. Tolerance: none, the planes' bytes are
// equal.
func TestEncoderKVStoreRing(t *testing.T) {
	dev, e := emuEncoder(t)
	cb := cpu.New(1)
	defer cb.Close()
	r := rand.New(rand.NewPCG(79, 80))
	for i, cfg := range []kv.Config{
		{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 128, Smooth: true, Rotate: true, Residual: 16},
		{Type: kv.Q4, GroupSize: 64, KVHeads: 1, HeadDim: 256, Residual: 64},
		{Type: kv.Q8, GroupSize: 32, KVHeads: 3, HeadDim: 64, Rotate: true, Residual: 8},
		{Type: kv.Q8, GroupSize: 64, KVHeads: 1, HeadDim: 192, Smooth: true},
		{Type: kv.F16, KVHeads: 2, HeadDim: 96, Rotate: true},
	} {
		cfg.Layers, cfg.Ctx = 2, 150
		window := []int{24, 33, 20, 40, 17}[i]
		cfg.LayerWindow = []int{0, window}
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			t.Run(fmt.Sprintf("%v_gs%d_d%d_ring%d_res%d_%v", cfg.Type, cfg.GroupSize, cfg.HeadDim, window, cfg.LayerResidual(1), o), func(t *testing.T) {
				cc, err := cb.NewKVCache(cfg, cfg.KVHeads, 64)
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				layers := []*KVLayer{opsLayer(t, dev, cfg), opsLayer(t, dev, cfg)}
				layers[1].Layer = 1
				layers[1].K = devBytes(t, dev, make([]byte, layers[1].PlaneBytes()), 0)
				layers[1].V = devBytes(t, dev, make([]byte, layers[1].PlaneBytes()), 0)
				if layers[1].Ring() != window || layers[1].PlaneBytes() >= layers[0].PlaneBytes() {
					t.Fatalf("layer 1: ring %d, planes of %d bytes (layer 0: %d)", layers[1].Ring(), layers[1].PlaneBytes(), layers[0].PlaneBytes())
				}
				w := cfg.KVHeads * cfg.HeadDim
				if cfg.Smooths() {
					l := opsLambda(r, w)
					for li, c := range layers {
						e.KVSetSmoothing(c, l)
						cb.KVSetSmoothing(cc, li, l)
					}
				}
				store := func(pos, rows int) {
					for li, c := range layers {
						k, v := randomFloats(r, rows*w, 2), randomFloats(r, rows*w, 1)
						e.KVStore(c, devFloats(t, dev, k, 0), devFloats(t, dev, v, 0), pos, rows)
						cb.KVStore(cc, li, cpuTensor(cb, k), cpuTensor(cb, v), pos, rows)
					}
				}
				store(0, 50)
				runEncoded(t, dev, e, o)
				store(50, 1)
				store(51, 1)
				store(52, 30)
				runEncoded(t, dev, e, o)
				store(80, 3)
				store(78, 9)
				store(87, 60)
				runEncoded(t, dev, e, o)
				if err := cb.Sync(); err != nil {
					t.Fatal(err)
				}
				for li, c := range layers {
					comparePlanes(t, cb, cc, li, c)
				}
			})
		}
	}
}

// KV arguments that break the contract are encoding errors.
func TestEncoderKVContract(t *testing.T) {
	dev, e := emuEncoder(t)
	cfg := kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 16, Smooth: true}
	c := opsLayer(t, dev, cfg)
	k := devFloats(t, dev, make([]float32, 4*128), 0)
	bad := opsLambda(rand.New(rand.NewPCG(1, 2)), 128)
	bad[5] = 3
	big := &KVLayer{Cfg: kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 512, Ctx: 1, Rotate: true}}
	big.K = devBytes(t, dev, make([]byte, big.PlaneBytes()), 0)
	big.V = big.K
	// A type without a layout (kv.TokenHeadLayout) is refused, not stored
	// with f16's sizes.
	unknown := &KVLayer{Cfg: cfg, K: c.K, V: c.V}
	unknown.Cfg.Type = kv.Type(len(kv.Types))
	for _, tc := range []struct {
		what string
		op   func()
	}{
		{"power of two", func() { e.KVSetSmoothing(c, bad) }},
		{"want 128", func() { e.KVSetSmoothing(c, bad[:7]) }},
		{"outside the context", func() { e.KVStore(c, k, k, 14, 3) }},
		{"floats in a region", func() { e.KVStore(c, k, k.Sub(0, 256), 0, 4) }},
		{"multiples of 16", func() { e.KVStore(c, k.Sub(4, 1024), k, 0, 1) }},
		{"at most 256", func() { e.KVStore(big, k, k, 0, 1) }},
		{"no storage layout", func() { e.KVStore(unknown, k, k, 0, 1) }},
	} {
		wantRefused(t, e, tc.what, tc.what, tc.op)
	}
	// An f16 cache checks λ and ignores it.
	f := opsLayer(t, dev, kv.Config{Type: kv.F16, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 4, Smooth: true})
	e.KVSetSmoothing(f, opsLambda(rand.New(rand.NewPCG(3, 4)), 128))
	if e.Err() != nil || e.List().Len() != 0 || f.Smoothed {
		t.Errorf("f16 cache: %v, %d dispatches, smoothed %v", e.Err(), e.List().Len(), f.Smoothed)
	}
}

// The rotation's constants (signs, Q_m) applied as the kernels apply them
// (signs, the Walsh–Hadamard butterflies on blocks of P scaled by 1/√P, the
// blocks mixed by Q_m summed in order) give kv.Rotation's R·x bit for bit,
// for power-of-two and other head dims; RotatesHeadDim takes exactly
// kv.Rotation's dims up to 256.
func TestRotationConstants(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{8, 24, 64, 80, 96, 128, 160, 192, 224, 248, 256} {
		rot, err := kv.NewRotation(d)
		if err != nil {
			t.Fatal(err)
		}
		consts, err := RotationConstants(d)
		if err != nil {
			t.Fatal(err)
		}
		p := d & -d
		m := d / p
		if want := d + map[bool]int{true: m * m, false: 0}[m > 1]; len(consts) != want {
			t.Fatalf("d %d: %d constants, want %d", d, len(consts), want)
		}
		x := randomFloats(r, d, 1)
		want := make([]float32, d)
		rot.Apply(want, x)
		got := make([]float32, d)
		for i := range got {
			got[i] = x[i] * consts[i]
		}
		norm := rotationNorm(d)
		for b := 0; b < d; b += p {
			blk := got[b : b+p]
			for h := 1; h < p; h *= 2 {
				for i := 0; i < p; i += 2 * h {
					for j := i; j < i+h; j++ {
						blk[j], blk[j+h] = blk[j]+blk[j+h], blk[j]-blk[j+h]
					}
				}
			}
			for i := range blk {
				blk[i] *= norm
			}
		}
		if m > 1 {
			q, mixed := consts[d:], make([]float32, d)
			for e := range mixed {
				b, j := e/p, e%p
				var acc float32
				for n := 0; n < m; n++ {
					acc += q[b*m+n] * got[n*p+j]
				}
				mixed[e] = acc
			}
			got = mixed
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("d %d (P %d, m %d): element %d is %v, kv.Rotation gives %v", d, p, m, i, got[i], want[i])
			}
		}
	}
	for d := -8; d <= 520; d++ {
		_, err := kv.NewRotation(d)
		if want := err == nil && d <= MaxRotatedHeadDim; RotatesHeadDim(d) != want {
			t.Errorf("RotatesHeadDim(%d) = %v, want %v", d, RotatesHeadDim(d), want)
		}
	}
}
