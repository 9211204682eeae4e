package kv

import (
	"math"
	"math/rand/v2"
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
	if l := calibrate(rowsWithOutlier(r, 2000, kvHeads, d, 1), 2000, kvHeads, d); l != nil {
		t.Fatalf("Gaussian K got smoothing factors %v", l)
	}
	k := rowsWithOutlier(r, 2000, kvHeads, d, 100)
	if l := calibrate(k, smoothMinRows-1, kvHeads, d); l != nil {
		t.Fatalf("%d rows calibrated", smoothMinRows-1)
	}
	l := calibrate(k, 2000, kvHeads, d)
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
// keep every dot product; rows appended later reuse the calibration.
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
		if err := c.Append(0, 0, k, v, n); err != nil {
			t.Fatal(err)
		}
		lv := c.Layer(0)
		lambda := lv.Lambda
		if lambda == nil {
			t.Fatal("no calibration on a 100-row prompt")
		}
		if err := c.Append(0, n, k[n*kvHeads*d:], v[n*kvHeads*d:], 1); err != nil {
			t.Fatal(err)
		}
		if &lv.Lambda[0] != &lambda[0] {
			t.Fatal("appending at position > 0 recalibrated")
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
