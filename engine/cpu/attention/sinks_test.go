package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
)

// randomSinks returns one logit per head, spread from −2 to 10 so that
// some heads' sink outweighs all their keys and others hardly count.
func randomSinks(r *rand.Rand, heads int) []float32 {
	s := make([]float32, heads)
	for i := range s {
		s[i] = float32(-2 + 12*float64(i)/float64(max(1, heads-1)) + r.Float64()/2)
	}
	return s
}

// sinkShare is 1 − (the sink's share of head h's softmax) from the exported
// scores of visible positions [lo, n): Z/(Z + e^sink).
func sinkShare(scores []float32, lo, n int, sink float32) float64 {
	m := float64(sink)
	for _, s := range scores[lo:n] {
		m = math.Max(m, float64(s))
	}
	var z float64
	for _, s := range scores[lo:n] {
		z += math.Exp(float64(s) - m)
	}
	return z / (z + math.Exp(float64(sink)-m))
}

// With sinks, decode attention is the same attention without them scaled,
// per head, by Z/(Z + e^sink), Z the plain softmax's Σ e^s over what the
// kernel read (taken from its score export). That holds for every cache
// layout, so it is checked on each: f16, q8, q4, rotated, smoothed, with a
// residual window, a sliding-window ring that has wrapped, across splits.
func TestDecodeSinksEveryCache(t *testing.T) {
	pool := testPool(t, 2)
	const n = 700
	for _, typ := range kv.Types {
		for _, c := range []struct {
			name             string
			rotate, smooth   bool
			residual, window int
			ring             bool
		}{
			{name: "plain"}, {name: "rotated", rotate: true}, {name: "smoothed", smooth: true},
			{name: "residual", residual: 64}, {name: "window", window: 300}, {name: "ring", window: 128, ring: true},
		} {
			if typ == kv.F16 && (c.rotate || c.smooth || c.residual > 0) {
				continue
			}
			name := fmt.Sprintf("%v %s", typ, c.name)
			p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125, Window: c.window}
			r := rand.New(rand.NewPCG(11, uint64(typ)))
			k, v := randomKV(r, p, n, false)
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: n,
				Rotate: c.rotate, Smooth: c.smooth, Residual: c.residual}
			if c.ring {
				cfg.LayerWindow = []int{c.window}
			}
			cache := fillCache(t, cfg, k, v, n)
			ws := NewWorkspace(p, n, 0, 2, nil)
			q := randomVec(r, p.Heads*p.HeadDim)
			plain := make([]float32, p.Heads*p.HeadDim)
			scores := make([]float32, p.Heads*n)
			if err := DecodeScores(pool, ws, plain, q, cache, 0, n, p, scores, n); err != nil {
				t.Fatal(name, err)
			}
			p.Sinks = randomSinks(r, p.Heads)
			got := make([]float32, p.Heads*p.HeadDim)
			if err := Decode(pool, ws, got, q, cache, 0, n, p); err != nil {
				t.Fatal(name, err)
			}
			lo := p.visible(n - 1)
			var moved float64
			for h := 0; h < p.Heads; h++ {
				share := sinkShare(scores[h*n:(h+1)*n], lo, n, p.Sinks[h])
				moved = max(moved, 1-share)
				for e := h * p.HeadDim; e < (h+1)*p.HeadDim; e++ {
					want := float64(plain[e]) * share
					if d := math.Abs(float64(got[e]) - want); d > 2e-5*math.Abs(want)+1e-6 {
						t.Fatalf("%s head %d element %d: got %g, want %g (sink share %.4f)", name, h, e, got[e], want, 1-share)
					}
				}
			}
			if moved < 0.5 { // the test must see sinks that matter
				t.Fatalf("%s: the largest sink share is only %.3f", name, moved)
			}
		}
	}
}

// Decode and prefill with sinks against float64 attention with the extra
// exp(sink − max) term, over the values the cache holds (prefix codes and
// f16 residual rows, new rows through f16), for every cache type, with and
// without a window. (A rotated cache rounds new rows in the rotated space,
// which this reference does not follow: TestDecodeSinksEveryCache covers it.)
func TestSinksMatchReference(t *testing.T) {
	pool := testPool(t, 2)
	for _, typ := range kv.Types {
		for _, c := range []struct {
			past, rows, window, residual int
		}{{0, 40, 0, 0}, {45, 70, 0, 0}, {100, 50, 20, 0}, {300, 33, 0, 64}} {
			if typ == kv.F16 && c.residual > 0 {
				continue
			}
			name := fmt.Sprintf("%v past%d rows%d w%d residual%d", typ, c.past, c.rows, c.window, c.residual)
			p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125, Window: c.window}
			r := rand.New(rand.NewPCG(uint64(c.past), 3))
			p.Sinks = randomSinks(r, p.Heads)
			total := c.past + c.rows + 1
			k, v := randomKV(r, p, total, false)
			cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: total, Residual: c.residual}
			cache := fillCache(t, cfg, k, v, c.past)
			ws := NewWorkspace(p, total, c.rows, 2, nil)
			qw, kw := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
			q := randomVec(r, c.rows*qw)
			out := make([]float32, c.rows*qw)
			if err := Prefill(pool, ws, out, q, k[c.past*kw:], v[c.past*kw:], c.rows, cache, 0, c.past, p); err != nil {
				t.Fatal(name, err)
			}
			kEff, vEff := windowReference(cache, k, v, c.past, c.residual)
			for _, x := range k[c.past*kw : (c.past+c.rows)*kw] {
				kEff = append(kEff, half.Round(x))
			}
			for _, x := range v[c.past*kw : (c.past+c.rows)*kw] {
				vEff = append(vEff, half.Round(x))
			}
			for i := 0; i < c.rows; i++ {
				want := decodeReference64(q[i*qw:(i+1)*qw], kEff, vEff, c.past+i+1, p)
				if _, rel := headStats(out[i*qw:(i+1)*qw], want, p.HeadDim); rel > maxStoredRel {
					t.Fatalf("%s prefill row %d: relative error %.3g", name, i, rel)
				}
			}
			if err := cache.Append(0, c.past, k[c.past*kw:], v[c.past*kw:], c.rows+1); err != nil {
				t.Fatal(err)
			}
			qd := randomVec(r, qw)
			dec := make([]float32, qw)
			if err := Decode(pool, ws, dec, qd, cache, 0, total, p); err != nil {
				t.Fatal(name, err)
			}
			kSt, vSt := windowReference(cache, k, v, total, c.residual)
			if _, rel := headStats(dec, decodeReference64(qd, kSt, vSt, total, p), p.HeadDim); rel > maxStoredRel {
				t.Fatalf("%s decode: relative error %.3g", name, rel)
			}
		}
	}
}

// The unfused baseline takes sinks as the fused kernel does.
func TestBaselineSinks(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(5, 6))
	p.Sinks = randomSinks(r, p.Heads)
	const n = 300
	k, v := randomKV(r, p, n, false)
	cache := newCache(t, p, kv.Q8, 32, n, k, v, n)
	b, err := NewDequantBuffers(p, n)
	if err != nil {
		t.Fatal(err)
	}
	q := randomVec(r, p.Heads*p.HeadDim)
	got, fused := make([]float32, len(q)), make([]float32, len(q))
	pool := testPool(t, 2)
	if err := DecodeDequantThenAttend(pool, b, got, q, cache, 0, n, p); err != nil {
		t.Fatal(err)
	}
	if err := Decode(pool, NewWorkspace(p, n, 0, 2, nil), fused, q, cache, 0, n, p); err != nil {
		t.Fatal(err)
	}
	if _, rel := headStats(got, f64(fused), p.HeadDim); rel > 1e-5 {
		t.Fatalf("baseline vs fused with sinks: relative error %.3g", rel)
	}
}

// Under H2O eviction the scores a step adds are the attention probabilities,
// sinks taking their share: per query head they sum to Z/(Z + e^sink).
func TestScoreAccumulationWithSinks(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(9, 9))
	const n = 100
	cfg := kv.Config{Type: kv.Q8, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 256, Evict: kv.DefaultEviction(kv.EvictH2O, 128)}
	k, v := randomKV(r, p, n, false)
	c := fillCache(t, cfg, k, v, n)
	ws := NewWorkspace(p, cfg.Slots(), 0, 2, nil)
	sc, err := NewScoreScratch(p, cfg.Slots(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := randomVec(r, p.Heads*p.HeadDim)
	out := make([]float32, len(q))
	scores := make([]float32, p.Heads*n)
	if err := DecodeScores(testPool(t, 2), ws, out, q, c, 0, n, p, scores, n); err != nil {
		t.Fatal(err)
	}
	p.Sinks = randomSinks(r, p.Heads)
	before := append([]float32(nil), c.Scores(0)...)
	if err := DecodeAccumulate(testPool(t, 2), ws, sc, out, q, c, 0, n, p); err != nil {
		t.Fatal(err)
	}
	after := c.Scores(0)
	g := p.Heads / p.KVHeads
	for kvh := 0; kvh < p.KVHeads; kvh++ {
		var added, want float64
		for t := 0; t < n; t++ {
			added += float64(after[kvh*cfg.Slots()+t] - before[kvh*cfg.Slots()+t])
		}
		for h := kvh * g; h < (kvh+1)*g; h++ {
			want += sinkShare(scores[h*n:(h+1)*n], 0, n, p.Sinks[h])
		}
		if math.Abs(added-want) > 1e-4*want {
			t.Fatalf("kv head %d: scores gained %.6f, want %.6f", kvh, added, want)
		}
	}
}

// Sinks of the wrong count or not finite are refused.
func TestSinksRejected(t *testing.T) {
	p := Params{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	for _, sinks := range [][]float32{{1, 2, 3}, {0, 0, float32(math.NaN()), 0}, {0, float32(math.Inf(1)), 0, 0}} {
		p.Sinks = sinks
		if err := p.validate(); err == nil {
			t.Fatalf("sinks %v accepted", sinks)
		}
	}
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
