package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/kv"
)

// Sampled context lengths: single token, around one block, several splits.
var testNs = []int{1, 31, 33, 257, 1000, 5000}

// Quality of each cache type against float64 attention on the original
// (unquantized) Gaussian K/V. q4 with gs 32 keeps each element to about 8%
// (half a step of range/15), which puts the output cosine at 0.985-0.995 on
// this data: the 0.99 the issue asks for is only met against the stored
// values (maxStoredRel). A 100× K outlier channel is out of reach for
// per-token groups along D whatever the kernel (measured: cosine 0.3-0.8
// for q4, 0.987 for q8); that is what the rotation option is for.
var minCosine = map[kv.Type]float64{kv.Q4: 0.98, kv.Q8: 0.9999, kv.F16: 0.99999}

const maxF16Rel = 1e-3

// Kernel exactness: against float64 attention on the values the cache
// stores, every type must agree to f32 accumulation error.
const maxStoredRel = 1e-4

func TestDecodeMatchesReference(t *testing.T) {
	worst := map[kv.Type]float64{kv.Q4: 1, kv.Q8: 1, kv.F16: 1}
	worstStored := map[kv.Type]float64{}
	var worstF16Rel float64
	defer func() {
		t.Logf("vs original values: worst output cosine %v, worst f16 relative error %.2g; worst relative error vs stored values: %v",
			worst, worstF16Rel, worstStored)
	}()
	withKernels(t, func(t *testing.T) {
		const ctx = 5000
		pool := testPool(t, 2)
		for _, d := range []int{64, 128, 256} {
			// K/V depend on the kv heads only, so every G shares them.
			p := Params{KVHeads: 2, HeadDim: d, Scale: 1 / float32(sqrt(d))}
			r := rand.New(rand.NewPCG(uint64(d), 7))
			kOut, vOut := randomKV(r, p, ctx, true)
			kClean, vClean := randomKV(r, p, ctx, false)
			for _, typ := range kv.Types {
				outlier := newCache(t, p, typ, 32, ctx, kOut, vOut, ctx)
				clean := newCache(t, p, typ, 32, ctx, kClean, vClean, ctx)
				kSt, vSt := storedKV(outlier, ctx)
				for _, g := range []int{1, 2, 4, 8} {
					p.Heads, p.Window = 2*g, 0
					ws := NewWorkspace(p, ctx, 0, 2, nil)
					out := make([]float32, p.Heads*d)
					for _, n := range testNs {
						for _, window := range []int{0, 300} {
							p.Window = window
							ws.p.Window = window
							name := fmt.Sprintf("d%d g%d %v n%d w%d", d, g, typ, n, window)
							q := randomVec(r, p.Heads*d)
							// Exactness on the outlier data: the fused
							// kernels compute attention over the stored values.
							if err := Decode(pool, ws, out, q, outlier, 0, n, p); err != nil {
								t.Fatal(name, err)
							}
							_, rel := headStats(out, decodeReference64(q, kSt, vSt, n, p), d)
							worstStored[typ] = max(worstStored[typ], rel)
							if rel > maxStoredRel {
								t.Fatalf("%s outlier: relative error %.3g vs stored values", name, rel)
							}
							// Quality against the original values.
							if err := Decode(pool, ws, out, q, clean, 0, n, p); err != nil {
								t.Fatal(name, err)
							}
							want := decodeReference64(q, kClean, vClean, n, p)
							_, rel = headStats(out, want, d)
							cos := cosine(out, want)
							worst[typ] = min(worst[typ], cos)
							if typ == kv.F16 {
								worstF16Rel = max(worstF16Rel, rel)
							}
							if cos < minCosine[typ] || (typ == kv.F16 && rel > maxF16Rel) {
								t.Fatalf("%s: cosine %.6f (min %v), relative error %.3g vs original", name, cos, minCosine[typ], rel)
							}
						}
					}
				}
			}
		}
	})
}

// TestOutlierChannel documents what a 100× K outlier channel does: the
// kernels stay exact on the stored values, while quantization itself (per
// token, along D) loses the other channels of the outlier's group; the
// cosines against the original values are logged, not asserted.
func TestOutlierChannel(t *testing.T) {
	pool := testPool(t, 2)
	for _, d := range []int{64, 128, 256} {
		p := Params{Heads: 8, KVHeads: 2, HeadDim: d, Scale: 1 / float32(sqrt(d))}
		r := rand.New(rand.NewPCG(9, uint64(d)))
		k, v := randomKV(r, p, 1000, true)
		ws := NewWorkspace(p, 1000, 0, 2, nil)
		q, out := randomVec(r, p.Heads*d), make([]float32, p.Heads*d)
		want := decodeReference64(q, k, v, 1000, p)
		line := fmt.Sprintf("d %d, n 1000, 100× K channel, vs original values:", d)
		for _, typ := range kv.Types {
			c := newCache(t, p, typ, 32, 1000, k, v, 1000)
			if err := Decode(pool, ws, out, q, c, 0, 1000, p); err != nil {
				t.Fatal(err)
			}
			kSt, vSt := storedKV(c, 1000)
			if _, rel := headStats(out, decodeReference64(q, kSt, vSt, 1000, p), d); rel > maxStoredRel {
				t.Fatalf("d %d %v: relative error %.3g vs stored values", d, typ, rel)
			}
			headCos, rel := headStats(out, want, d)
			line += fmt.Sprintf(" %v cosine %.4f (worst head %.4f, rel %.2g);", typ, cosine(out, want), headCos, rel)
		}
		t.Log(line)
	}
}
