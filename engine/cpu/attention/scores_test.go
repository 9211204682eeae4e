package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"nibble/engine/half"
	"nibble/engine/kv"
	"nibble/engine/parallel"
)

// originalKey writes the key of (kvh, pos) in the original space as the
// decode kernel reads it: from the residual window's f16 ring when it holds
// pos, from the codes otherwise, with rotation and smoothing undone.
func originalKey(dst []float32, lv *kv.LayerView, kvh, pos int) {
	if !lv.TailHolds(pos) {
		lv.Dequantize(dst, &lv.K, kvh, pos)
		return
	}
	for i, h := range lv.TailRow(&lv.K, kvh, pos) {
		dst[i] = half.ToFloat32(h)
	}
	if lv.Rot != nil {
		lv.Rot.Invert(dst, dst)
	}
	if lv.Lambda != nil {
		for i, l := range lv.Lambda[kvh*lv.HeadDim : (kvh+1)*lv.HeadDim] {
			dst[i] *= l
		}
	}
}

// scoreTol bounds an exported score's error relative to the head's largest
// |score|: float32 sums of D products in another order; for q4/q8 through
// the qdot identity (scale·Σq·code + bias·Σq), whose terms cancel more the
// wider the codes, with a ×100 outlier channel and no smoothing. Measured
// worst: f16 1.1e-5, q4 1.6e-5, q8 1.0e-4.
func scoreTol(typ kv.Type) float64 {
	if typ == kv.Q8 {
		return 4e-4
	}
	return 5e-5
}

// TestDecodeScores checks DecodeScores' export against float64 Scale·q·k
// with the dequantized keys (the ring's f16 rows for the residual window),
// within scoreTol, for every kernel set, q4/q8/f16, GQA 1 and 4, lengths
// on both sides of block and split edges, sliding windows, and residual
// windows (with rotation and smoothing) on and off. Positions
// outside the visible range stay untouched, the output equals Decode's bit
// for bit, and reading codes where the ring holds a position (or the other
// way round) is far outside the bound for q4.
func TestDecodeScores(t *testing.T) {
	const ctx = 700
	pool := testPool(t, 2)
	r := rand.New(rand.NewPCG(21, 22))
	for _, kernels := range []string{"in use", "portable"} {
		if kernels == "portable" {
			if !kern.q4Permuted {
				continue // the portable set is the one in use
			}
			simdSet := kern
			kern = portable
			defer func() { kern = simdSet }()
		}
		for _, typ := range []kv.Type{kv.Q4, kv.Q8, kv.F16} {
			for _, g := range []int{1, 4} {
				for _, residual := range []int{0, 64} {
					p := Params{Heads: 2 * g, KVHeads: 2, HeadDim: 64, Scale: 0.125}
					k, v := randomKV(r, p, ctx, true)
					// Rotation and smoothing on the residual cases: both are undone in the reference.
					cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 1, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx,
						Residual: residual, Rotate: residual > 0, Smooth: residual > 0}
					c, err := kv.New(cfg, nil)
					if err != nil {
						t.Fatal(err)
					}
					if cfg.Smooth {
						calibrate(t, c, k, ctx)
					}
					ws := NewWorkspace(p, ctx, 0, 2, nil)
					row := p.KVHeads * p.HeadDim
					n := 0
					for _, next := range []int{1, 31, 32, 33, 63, 65, 256, 257, 511, 513, 600, 700} {
						if err := c.Append(0, n, k[n*row:], v[n*row:], next-n); err != nil {
							t.Fatal(err)
						}
						n = next
						for _, window := range []int{0, 40} {
							p.Window = window
							name := fmt.Sprintf("%s kernels %v G%d residual %d n %d window %d", kernels, typ, g, residual, n, window)
							checkDecodeScores(t, name, pool, ws, c, p, n, r)
						}
					}
				}
			}
		}
	}
}

func checkDecodeScores(t *testing.T, name string, tp *parallel.Pool, ws *Workspace, c *kv.Cache, p Params, n int, r *rand.Rand) {
	t.Helper()
	lv := c.Layer(0)
	d, g := p.HeadDim, p.group()
	q := randomVec(r, p.Heads*d)
	stride := n + 3
	scores := make([]float32, p.Heads*stride)
	nan := float32(math.NaN())
	for i := range scores {
		scores[i] = nan
	}
	out, plain := make([]float32, p.Heads*d), make([]float32, p.Heads*d)
	if err := DecodeScores(tp, ws, out, q, c, 0, n, p, scores, stride); err != nil {
		t.Fatal(name, err)
	}
	if err := Decode(tp, ws, plain, q, c, 0, n, p); err != nil {
		t.Fatal(name, err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(plain[i]) {
			t.Fatalf("%s: output %d is %g with the export, %g without", name, i, out[i], plain[i])
		}
	}
	lo := p.visible(n - 1)
	key, codes := make([]float32, d), make([]float32, d)
	for h := 0; h < p.Heads; h++ {
		kvh := h / g
		want := make([]float64, n)
		var top float64
		for pos := lo; pos < n; pos++ {
			originalKey(key, lv, kvh, pos)
			var s float64
			for i, x := range key {
				s += float64(q[h*d+i]) * float64(x)
			}
			want[pos] = s * float64(p.Scale)
			top = max(top, math.Abs(want[pos]))
		}
		tol := scoreTol(lv.Type) * top
		ringHeld, codesApart := 0, 0.0
		for pos := 0; pos < stride; pos++ {
			got := scores[h*stride+pos]
			if pos < lo || pos >= n {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%s: head %d position %d outside [%d, %d) written: %g", name, h, pos, lo, n, got)
				}
				continue
			}
			if diff := math.Abs(float64(got) - want[pos]); !(diff <= tol) {
				t.Fatalf("%s: head %d position %d score %g, want %g (|diff| %.3g > %.3g)", name, h, pos, got, want[pos], diff, tol)
			}
			if lv.Type == kv.Q4 && lv.TailHolds(pos) {
				lv.Dequantize(codes, &lv.K, kvh, pos)
				var s float64
				for i, x := range codes {
					s += float64(q[h*d+i]) * float64(x)
				}
				ringHeld++
				codesApart = max(codesApart, math.Abs(s*float64(p.Scale)-want[pos]))
			}
		}
		// The q4 codes and the ring's f16 rows give scores far apart: the
		// bound tells which one was read.
		if ringHeld > 0 && codesApart <= 10*tol {
			t.Fatalf("%s: head %d: over %d ring positions the codes' scores are within %.3g of the ring's; the test cannot tell them apart", name, h, ringHeld, codesApart)
		}
	}
}

func TestDecodeScoresBadArgs(t *testing.T) {
	pool := testPool(t, 1)
	p := Params{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: 0.2}
	r := rand.New(rand.NewPCG(1, 2))
	k, v := randomKV(r, p, 50, false)
	c := fillCache(t, kv.Config{Type: kv.Q4, GroupSize: 32, Layers: 1, KVHeads: 2, HeadDim: 32, Ctx: 64}, k, v, 50)
	ws := NewWorkspace(p, 64, 0, 1, nil)
	q, out := randomVec(r, 4*32), make([]float32, 4*32)
	for _, tc := range []struct {
		scores []float32
		stride int
	}{
		{make([]float32, 4*50), 49},    // stride shorter than n
		{make([]float32, 3*50+49), 50}, // one float short
	} {
		if err := DecodeScores(pool, ws, out, q, c, 0, 50, p, tc.scores, tc.stride); err == nil {
			t.Fatalf("%d scores at stride %d for 4 heads × 50 positions: no error", len(tc.scores), tc.stride)
		}
	}
	if err := DecodeScores(pool, ws, out, q, c, 0, 50, p, make([]float32, 3*50+50), 50); err != nil {
		t.Fatalf("exact size: %v", err)
	}
}
