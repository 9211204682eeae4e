package kv

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// rowsWithOutlier returns n rows of kvHeads·d standard normal values whose
// channel 5 of every head is scaled by big.
func rowsWithOutlier(r *rand.Rand, n, kvHeads, d int, big float32) []float32 {
	k := make([]float32, n*kvHeads*d)
	for i := range k {
		k[i] = float32(r.NormFloat64())
		if i%d == 5 {
			k[i] *= big
		}
	}
	return k
}

func TestCalibrateFindsOutlierChannels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const kvHeads, d = 2, 128
	if l := Calibrate(rowsWithOutlier(r, 2000, kvHeads, d, 1), 2000, kvHeads, d); l != nil {
		t.Fatalf("Gaussian K got smoothing factors %v", l)
	}
	k := rowsWithOutlier(r, 2000, kvHeads, d, 100)
	if l := Calibrate(k, smoothMinRows-1, kvHeads, d); l != nil {
		t.Fatalf("%d rows calibrated", smoothMinRows-1)
	}
	l := Calibrate(k, 2000, kvHeads, d)
	if l == nil {
		t.Fatal("100× channel not found")
	}
	for i, x := range l {
		want := float32(1)
		if i%d == 5 {
			want = 32 // 100^0.75 = 31.6, as a power of two
		}
		if x != want {
			t.Fatalf("λ[%d] = %g, want %g", i, x, want)
		}
	}
}

// A smoothed cache stores k/λ and reads back k; queries transformed alike
// keep every dot product; rows appended later, at position 0 too, keep the
// calibration (only SetLambda changes it).
func TestSmoothedCacheKeepsDotProducts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const kvHeads, d, n = 2, 64, 100
	for _, rotate := range []bool{false, true} {
		c, err := New(Config{Type: Q8, GroupSize: 32, Layers: 1, KVHeads: kvHeads, HeadDim: d, Ctx: n + 1, Smooth: true, Rotate: rotate}, nil)
		if err != nil {
			t.Fatal(err)
		}
		k := rowsWithOutlier(r, n+1, kvHeads, d, 100)
		v := rowsWithOutlier(r, n+1, kvHeads, d, 1)
		if err := c.SetLambda(0, Calibrate(k, n, kvHeads, d)); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(0, 0, k, v, n); err != nil {
			t.Fatal(err)
		}
		lv := c.Layer(0)
		lambda := slices.Clone(lv.Lambda)
		if lambda == nil {
			t.Fatal("no calibration on a 100-row prompt")
		}
		if err := c.Append(0, n, k[n*kvHeads*d:], v[n*kvHeads*d:], 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(0, 0, k[:kvHeads*d], v[:kvHeads*d], 1); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lv.Lambda, lambda) {
			t.Fatal("appending changed the calibration")
		}
		got, kq, qq := make([]float32, d), make([]float32, d), make([]float32, d)
		q := rowsWithOutlier(r, 1, 1, d, 1)
		for pos := 0; pos <= n; pos++ {
			for h := 0; h < kvHeads; h++ {
				orig := k[(pos*kvHeads+h)*d : (pos*kvHeads+h+1)*d]
				lv.Dequantize(got, &lv.K, h, pos)
				var dot, tdot, ee, maxStored, maxLambda float64
				tk, tq := lv.TransformKey(kq, orig, h), lv.TransformQuery(qq, q, h)
				for i := range got {
					e := float64(got[i] - orig[i])
					ee += e * e
					dot += float64(q[i]) * float64(orig[i])
					tdot += float64(tq[i]) * float64(tk[i])
					maxStored = max(maxStored, math.Abs(float64(tk[i])))
					maxLambda = max(maxLambda, float64(lambda[h*d+i]))
				}
				// Stored values are off by at most half a q8 step (range/255,
				// range ≤ 2·max|stored|, plus fp16 slack); reading back scales
				// that by λ after an orthogonal rotation.
				if bound := maxLambda * math.Sqrt(d) * 1.1 * maxStored / 255; math.Sqrt(ee) > bound {
					t.Fatalf("rotate=%v pos %d head %d: read back off by %.3g (bound %.3g)", rotate, pos, h, math.Sqrt(ee), bound)
				}
				if math.Abs(dot-tdot) > 1e-4*(1+math.Abs(dot)) {
					t.Fatalf("rotate=%v: q·k %g became %g after the transforms", rotate, dot, tdot)
				}
			}
		}
	}
}

// Rows added in pieces give the λ of the rows added at once, without
// allocating; Reset starts over.
func TestCalibrationInPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const kvHeads, d, n = 2, 64, 40
	k := rowsWithOutlier(r, n, kvHeads, d, 50)
	want := Calibrate(k, n, kvHeads, d)
	if want == nil {
		t.Fatal("no λ for a 50× channel")
	}
	c := NewCalibration(kvHeads, d)
	dst := make([]float32, kvHeads*d)
	c.Add(k[:kvHeads*d*3])
	c.Add(k[kvHeads*d*3 : kvHeads*d*3+kvHeads*d/2]) // half a row: ignored
	for row := 3; row < n; row++ {
		c.Add(k[row*kvHeads*d : (row+1)*kvHeads*d])
	}
	if c.Rows() != n || !slices.Equal(c.Lambda(dst), want) {
		t.Fatalf("%d rows in pieces: λ differs from all at once", c.Rows())
	}
	if allocs := testing.AllocsPerRun(10, func() { c.Reset(); c.Add(k); c.Lambda(dst) }); allocs != 0 {
		t.Fatalf("Reset, Add, Lambda allocate %.0f times", allocs)
	}
	c.Reset()
	c.Add(k[:kvHeads*d*(MinCalibrationRows-1)])
	if c.Lambda(dst) != nil {
		t.Fatalf("%d rows calibrated", MinCalibrationRows-1)
	}
}

// SetLambda takes only what a Calibration can produce, copies it, clears on
// nil, and leaves an f16 or unsmoothed cache alone.
func TestSetLambda(t *testing.T) {
	const kvHeads, d = 1, 32
	c, err := New(Config{Type: Q4, GroupSize: 32, Layers: 2, KVHeads: kvHeads, HeadDim: d, Ctx: 4, Smooth: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float32, d)
	for i := range good {
		good[i] = float32(math.Ldexp(1, i%5-2))
	}
	for _, bad := range [][]float32{good[:d-1], append(slices.Clone(good[:d-1]), 3), append(slices.Clone(good[:d-1]), 0),
		append(slices.Clone(good[:d-1]), float32(math.NaN())), append(slices.Clone(good[:d-1]), 1<<13)} {
		if err := c.SetLambda(1, bad); err == nil || !strings.Contains(err.Error(), "layer 1") {
			t.Fatalf("λ %v: %v", bad[len(bad)-1], err)
		}
	}
	if err := c.SetLambda(2, good); err == nil {
		t.Fatal("layer 2 of 2 accepted")
	}
	if err := c.SetLambda(1, good); err != nil {
		t.Fatal(err)
	}
	good[0] = 64 // the cache keeps its copy
	if lv := c.Layer(1); lv.Lambda[0] != 0.25 || c.Layer(0).Lambda != nil {
		t.Fatalf("λ[0] = %v after the caller's slice changed; layer 0 %v", lv.Lambda[0], c.Layer(0).Lambda)
	}
	if err := c.SetLambda(1, nil); err != nil || c.Layer(1).Lambda != nil {
		t.Fatalf("nil did not clear: %v", err)
	}
	for _, cfg := range []Config{{Type: F16, Smooth: true}, {Type: Q8, GroupSize: 32}} {
		cfg.Layers, cfg.KVHeads, cfg.HeadDim, cfg.Ctx = 1, kvHeads, d, 4
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetLambda(0, good); err != nil || c.Layer(0).Lambda != nil || cfg.Smooths() {
			t.Fatalf("%v smooth=%v: λ set (%v)", cfg.Type, cfg.Smooth, err)
		}
	}
}
