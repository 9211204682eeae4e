package attention

import (
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// outlierChannel of every K head is scaled 100×: the worst case for
// per-token groups along the head dimension.
const outlierChannel = 3

// scoreStd is the spread of attention logits the tests aim for: the
// shared test models' QK/√d scores have std 1.57 (testdata README §2).
const scoreStd = 1.57

// outlierScale is the softmax scale that gives q·k logits a std of
// scoreStd when K has the 100× channel and q is standard normal. The usual
// 1/√D would put it near 100/√D (12.5 at D 64): softmax then degenerates to
// a near one-hot pick that even rounding K to f16 moves by 0.6%, which no
// trained model's attention looks like.
func outlierScale(d int) float32 {
	return float32(scoreStd / math.Sqrt(float64(d-1+100*100)))
}

// randomKV returns n positions of K and V (KVHeads·HeadDim floats each),
// standard normal, K's outlier channel 100× larger.
func randomKV(r *rand.Rand, p Params, n int, outlier bool) (k, v []float32) {
	row := p.KVHeads * p.HeadDim
	k, v = make([]float32, n*row), make([]float32, n*row)
	for i := range k {
		k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		if outlier && i%p.HeadDim == outlierChannel {
			k[i] *= 100
		}
	}
	return k, v
}

func randomVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// newCache returns a cache holding rows [0, n) of k and v, smoothing its
// channels as sessions do (calibrated on those rows).
func newCache(t testing.TB, p Params, typ kv.Type, gs, ctx int, k, v []float32, n int) *kv.Cache {
	t.Helper()
	return fillCache(t, kv.Config{Type: typ, GroupSize: gs, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx, Smooth: true}, k, v, n)
}

func fillCache(t testing.TB, cfg kv.Config, k, v []float32, n int) *kv.Cache {
	t.Helper()
	c, err := kv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	calibrate(t, c, k, n)
	if err := c.Append(0, 0, k, v, n); err != nil {
		t.Fatal(err)
	}
	return c
}

// calibrate sets the smoothing of layer 0 from the first n rows of k, as
// the forward pass does before a batch that starts the cache.
func calibrate(t testing.TB, c *kv.Cache, k []float32, n int) {
	t.Helper()
	cfg := c.Config()
	if err := c.SetLambda(0, kv.Calibrate(k, n, cfg.KVHeads, cfg.HeadDim)); err != nil {
		t.Fatal(err)
	}
}

// storedKV reads back what the cache holds for positions [0, n).
func storedKV(c *kv.Cache, n int) (k, v []float32) {
	lv := c.Layer(0)
	d, hk := lv.HeadDim, lv.KVHeads
	k, v = make([]float32, n*hk*d), make([]float32, n*hk*d)
	for t := 0; t < n; t++ {
		for h := 0; h < hk; h++ {
			lv.Dequantize(k[(t*hk+h)*d:], &lv.K, h, t)
			lv.Dequantize(v[(t*hk+h)*d:], &lv.V, h, t)
		}
	}
	return k, v
}

// decodeReference64 is naive float64 attention of q (one position) against
// keys and values [max(0, n-Window), n) of k and v (positions × KVHeads·D),
// scores soft-capped where p says; a sink adds exp(sink − max) to the
// denominator, max taken over the scores and the sink.
func decodeReference64(q, k, v []float32, n int, p Params) []float64 {
	d, g, row := p.HeadDim, p.group(), p.KVHeads*p.HeadDim
	lo := p.visible(n - 1)
	out := make([]float64, p.Heads*d)
	s := make([]float64, n)
	for h := 0; h < p.Heads; h++ {
		kvh := h / g
		qh := q[h*d : (h+1)*d]
		m := math.Inf(-1)
		for t := lo; t < n; t++ {
			var dot float64
			for e, x := range k[t*row+kvh*d : t*row+(kvh+1)*d] {
				dot += float64(qh[e]) * float64(x)
			}
			s[t] = dot * float64(p.Scale)
			if c := float64(p.Softcap); c > 0 {
				s[t] = c * math.Tanh(s[t]/c)
			}
			m = math.Max(m, s[t])
		}
		var sum float64
		if p.Sinks != nil {
			sink := float64(p.Sinks[h])
			m = math.Max(m, sink)
			sum = math.Exp(sink - m)
		}
		oh := out[h*d : (h+1)*d]
		for t := lo; t < n; t++ {
			w := math.Exp(s[t] - m)
			sum += w
			for e, x := range v[t*row+kvh*d : t*row+(kvh+1)*d] {
				oh[e] += w * float64(x)
			}
		}
		for e := range oh {
			oh[e] /= sum
		}
	}
	return out
}

// relError is |got - want| / |want| over the whole output (all heads).
func relError(got []float32, want []float64) float64 {
	var ee, ww float64
	for i, w := range want {
		e := float64(got[i]) - w
		ee += e * e
		ww += w * w
	}
	return math.Sqrt(ee / ww)
}

// headStats returns the smallest per-head cosine and largest per-head
// relative error of got against want.
func headStats(got []float32, want []float64, d int) (minCos, maxRel float64) {
	minCos = 1
	for h := 0; h*d < len(want); h++ {
		var dot, gg, ww, ee float64
		for e := h * d; e < (h+1)*d; e++ {
			g, w := float64(got[e]), want[e]
			dot += g * w
			gg += g * g
			ww += w * w
			ee += (g - w) * (g - w)
		}
		minCos = math.Min(minCos, dot/math.Sqrt(gg*ww))
		maxRel = math.Max(maxRel, math.Sqrt(ee/ww))
	}
	return
}

func testPool(t testing.TB, threads int) *parallel.Pool {
	p := parallel.NewPool(threads)
	t.Cleanup(p.Close)
	return p
}

// withKernels runs f with the kernels in use (SIMD where the CPU has them);
// TestKernelSetsAgree holds the portable set to the same references.
func withKernels(t *testing.T, f func(t *testing.T)) {
	f(t)
}

func sqrt(n int) float64 { return math.Sqrt(float64(n)) }
