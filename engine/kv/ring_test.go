package kv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// A ring layer's planes hold its window; Bytes counts each layer as New
// allocates it; Validate refuses bad windows and rings with eviction.
func TestRingConfig(t *testing.T) {
	cfg := Config{Type: Q4, GroupSize: 32, Layers: 3, KVHeads: 2, HeadDim: 64, Ctx: 1000, Residual: 64, LayerWindow: []int{100, 0, 2000}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bpth := BytesPerTokenHead(Q4, 64, 32)
	want := int64(2 * 2 * ((100*bpth + 64*128) + 2*(1000*bpth+64*128)))
	if got := cfg.Bytes(); got != want {
		t.Errorf("Bytes %d, want %d", got, want)
	}
	if cfg.LayerRing(0) != 100 || cfg.LayerRing(1) != 0 || cfg.LayerRing(2) != 0 || cfg.LayerSlots(2) != 1000 {
		t.Errorf("rings %d %d %d, slots of layer 2 %d", cfg.LayerRing(0), cfg.LayerRing(1), cfg.LayerRing(2), cfg.LayerSlots(2))
	}
	var allocated int64
	c, err := New(cfg, func(n int) []byte { allocated += int64(n); return make([]byte, n) })
	if err != nil {
		t.Fatal(err)
	}
	if allocated != want || c.Bytes() != want {
		t.Errorf("allocated %d, cache says %d, want %d", allocated, c.Bytes(), want)
	}
	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{Type: F16, Layers: 2, KVHeads: 1, HeadDim: 8, Ctx: 10, LayerWindow: []int{4}}, "1 layer windows for 2 layers"},
		{Config{Type: F16, Layers: 1, KVHeads: 1, HeadDim: 8, Ctx: 10, LayerWindow: []int{-1}}, "negative window"},
		{Config{Type: F16, Layers: 1, KVHeads: 1, HeadDim: 8, Ctx: 10, LayerWindow: []int{4}, Evict: DefaultEviction(EvictWindow, 5)}, "cannot keep rings"},
	} {
		if err := bad.cfg.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: error %v, want %q", bad.cfg, err, bad.want)
		}
	}
}

// Appends in batches of 1, 7, 64 and 100 rows (more than the ring) leave
// the last window's positions readable at their slots, as an unbounded
// cache holds them, for every type; a read further back, or a rewind past
// a wrap, is refused, and the wrap is reported.
func TestRingAppend(t *testing.T) {
	const (
		window, n, heads, d = 64, 300, 2, 64
	)
	row := func(pos int) []float32 {
		r := make([]float32, heads*d)
		for i := range r {
			r[i] = float32(math.Sin(float64(pos*131 + i)))
		}
		return r
	}
	for _, typ := range Types {
		for _, batch := range []int{1, 7, 64, 100} {
			t.Run(fmt.Sprintf("%v/batch%d", typ, batch), func(t *testing.T) {
				base := Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: heads, HeadDim: d, Ctx: n, Residual: 16}
				ringCfg := base
				ringCfg.LayerWindow = []int{window}
				ring, err := New(ringCfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				full, err := New(base, nil)
				if err != nil {
					t.Fatal(err)
				}
				for pos := 0; pos < n; pos += batch {
					m := min(batch, n-pos)
					var k, v []float32
					for i := range m {
						k, v = append(k, row(pos+i)...), append(v, row(pos+i+n)...)
					}
					if err := ring.Append(0, pos, k, v, m); err != nil {
						t.Fatal(err)
					}
					if err := full.Append(0, pos, k, v, m); err != nil {
						t.Fatal(err)
					}
				}
				lv, fv := ring.Layer(0), full.Layer(0)
				got, want := make([]float32, d), make([]float32, d)
				for pos := n - window; pos < n; pos++ {
					for h := range heads {
						for _, pl := range [][2]*Plane{{&lv.K, &fv.K}, {&lv.V, &fv.V}} {
							lv.Dequantize(got, pl[0], h, pos)
							fv.Dequantize(want, pl[1], h, pos)
							for i := range got {
								if got[i] != want[i] {
									t.Fatalf("position %d head %d element %d: ring %g, unbounded %g", pos, h, i, got[i], want[i])
								}
							}
						}
					}
				}
				if err := lv.CheckRead(n-window, n); err != nil {
					t.Error(err)
				}
				if err := lv.CheckRead(n-window-1, n); err == nil {
					t.Error("a read of one position more than the window was not refused")
				}
				if !ring.RingWrapped() || full.RingWrapped() {
					t.Errorf("wrapped: ring %v, unbounded %v", ring.RingWrapped(), full.RingWrapped())
				}
				// A rewind by 10 positions: what the window before it needs
				// was overwritten.
				if err := ring.Append(0, n-10, row(0), row(1), 1); err != nil {
					t.Fatal(err)
				}
				if err := lv.CheckRead(n-9-window+1, n-9); err == nil {
					t.Error("a read after a rewind past the wrap was not refused")
				}
				// Starting over at position 0 makes the ring whole again.
				if err := ring.Append(0, 0, row(0), row(1), 1); err != nil {
					t.Fatal(err)
				}
				if ring.RingWrapped() || lv.CheckRead(0, 1) != nil {
					t.Errorf("after position 0: wrapped %v, read %v", ring.RingWrapped(), lv.CheckRead(0, 1))
				}
			})
		}
	}
}

// ResumableFrom agrees with what the planes hold: over random appends
// (extensions, rewinds to any earlier position, restarts at 0), each row
// stored with a value of its own, a position p counts as resumable exactly
// when every ring layer's slots still hold the rows of the current sequence
// at [max(0, p+1−window), p), and ResumableFrom(n) is the largest such p ≤ n.
func TestRingResumableFrom(t *testing.T) {
	const heads, d, ctx = 1, 8, 100
	windows := []int{8, 0, 13}
	c, err := New(Config{Type: F16, Layers: len(windows), KVHeads: heads, HeadDim: d, Ctx: ctx, LayerWindow: windows}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var seq []float32  // seq[q]: the value of the current sequence's row at q
	next := float32(1) // f16 holds integers exactly up to 2048
	held := func(p int) bool {
		for l, w := range windows {
			if w == 0 {
				continue
			}
			lv, got := c.Layer(l), make([]float32, d)
			for q := max(0, p+1-w); q < p; q++ {
				lv.Dequantize(got, &lv.K, 0, q)
				if got[0] != seq[q] {
					return false
				}
			}
		}
		return true
	}
	sawWrapResume, sawRefused := false, false
	for op := range 300 {
		n := 1 + rng.IntN(12)
		pos := len(seq)
		switch r := rng.IntN(10); {
		case r < 2 && pos > 0:
			pos = rng.IntN(pos)
		case r == 2 || pos+n > ctx:
			pos = 0
		}
		rows := make([]float32, n*heads*d)
		seq = seq[:pos]
		for i := range n {
			for j := range heads * d {
				rows[i*heads*d+j] = next
			}
			seq = append(seq, next)
			next++
		}
		if next > 2000 {
			break
		}
		for l := range windows {
			if err := c.Append(l, pos, rows, rows, n); err != nil {
				t.Fatal(err)
			}
		}
		best := 0
		for m := 0; m <= len(seq); m++ {
			if held(m) {
				best = m
			}
			if got := c.ResumableFrom(m); got != best {
				t.Fatalf("op %d (append of %d at %d, sequence of %d): ResumableFrom(%d) = %d, the planes allow %d", op, n, pos, len(seq), m, got, best)
			}
			if c.RingWrapped() && m == len(seq) && best == m {
				sawWrapResume = true
			}
			if c.RingWrapped() && m > 0 && best == 0 {
				sawRefused = true
			}
		}
	}
	if !sawWrapResume || !sawRefused {
		t.Errorf("the walk never resumed at the end of a wrapped ring (%v) or refused an earlier position of one (%v)", sawWrapResume, sawRefused)
	}
}
