package attention

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"nibble/engine/kv"
)

func TestThreadCountsAgree(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		const n = 2000
		for _, typ := range kv.Types {
			p := Params{Heads: 8, KVHeads: 2, HeadDim: 128, Scale: 0.09, Window: 1800}
			r := rand.New(rand.NewPCG(11, uint64(typ)))
			k, v := randomKV(r, p, n+16, true)
			cache := newCache(t, p, typ, 32, n+16, k, v, n)
			q := randomVec(r, 16*p.Heads*p.HeadDim)
			kw := p.KVHeads * p.HeadDim
			var dec, pre [2][]float32
			for i, threads := range []int{1, 2} {
				ws := NewWorkspace(p, n+16, 16, 2, nil)
				pool := testPool(t, threads)
				dec[i] = make([]float32, p.Heads*p.HeadDim)
				pre[i] = make([]float32, 16*p.Heads*p.HeadDim)
				if err := Decode(pool, ws, dec[i], q, cache, 0, n, p); err != nil {
					t.Fatal(err)
				}
				if err := Prefill(pool, ws, pre[i], q, k[n*kw:], v[n*kw:], 16, cache, 0, n, p); err != nil {
					t.Fatal(err)
				}
			}
			if s1, s2 := (&Workspace{maxSplits: 8}).splitCount(n-p.visible(n-1), 1), (&Workspace{maxSplits: 8}).splitCount(n-p.visible(n-1), 2); s1 == s2 {
				t.Fatalf("1 and 2 threads use the same split count %d: the test compares nothing", s1)
			}
			for _, pair := range [][2][]float32{dec, pre} {
				for i := range pair[0] {
					if d := math.Abs(float64(pair[0][i] - pair[1][i])); d > 1e-5*(1+math.Abs(float64(pair[0][i]))) {
						t.Fatalf("%v: element %d differs between 1 and 2 threads: %v vs %v", typ, i, pair[0][i], pair[1][i])
					}
				}
			}
		}
	})
}

func TestSplitCount(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		for _, ctx := range []int{100, 1000, 131072} {
			ws := &Workspace{maxSplits: maxSplits(ctx, threads)}
			for nTok := 1; nTok <= ctx; nTok = nTok*3 + 1 {
				s := ws.splitCount(nTok, threads)
				chunk := (nTok + s - 1) / s
				switch {
				case s < 1 || s > ws.maxSplits:
					t.Fatalf("threads %d n %d: %d splits outside [1, %d]", threads, nTok, s, ws.maxSplits)
				case s > 1 && chunk < minChunk:
					t.Fatalf("threads %d n %d: chunk %d < %d", threads, nTok, chunk, minChunk)
				case nTok >= minChunk*threads && s%threads != 0:
					t.Fatalf("threads %d n %d: %d splits not a multiple of the threads", threads, nTok, s)
				case (s-1)*chunk >= nTok:
					t.Fatalf("threads %d n %d: empty split", threads, nTok)
				}
			}
		}
	}
}

func TestWorkspaceBytesIsWhatIsAllocated(t *testing.T) {
	for _, c := range []struct {
		p                      Params
		ctx, maxBatch, threads int
	}{
		{Params{Heads: 32, KVHeads: 8, HeadDim: 128}, 131072, 512, 2},
		{Params{Heads: 7, KVHeads: 1, HeadDim: 64}, 100, 0, 1},
		{Params{Heads: 16, KVHeads: 16, HeadDim: 256}, 4096, 64, 16},
	} {
		var got int64
		ws := NewWorkspace(c.p, c.ctx, c.maxBatch, c.threads, func(n int) []byte { got += int64(n); return make([]byte, n) })
		if ws.err != nil {
			t.Fatal(ws.err)
		}
		if want := WorkspaceBytes(c.p, c.ctx, c.maxBatch, c.threads); got != want || want == 0 {
			t.Fatalf("%+v: allocated %d, WorkspaceBytes %d", c, got, want)
		}
	}
}

func TestBadArgumentsReturnErrors(t *testing.T) {
	p := Params{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(1, 1))
	k, v := randomKV(r, p, 10, false)
	cache := newCache(t, p, kv.Q4, 32, 10, k, v, 10)
	ws := NewWorkspace(p, 10, 4, 1, nil)
	pool := testPool(t, 1)
	q, out := randomVec(r, 4*4*64), make([]float32, 4*4*64)
	for name, err := range map[string]error{
		"n 0":            Decode(pool, ws, out, q, cache, 0, 0, p),
		"n past ctx":     Decode(pool, ws, out, q, cache, 0, 11, p),
		"layer":          Decode(pool, ws, out, q, cache, 1, 5, p),
		"short q":        Decode(pool, ws, out, q[:10], cache, 0, 5, p),
		"other params":   Decode(pool, ws, out, q, cache, 0, 5, Params{Heads: 2, KVHeads: 2, HeadDim: 64}),
		"bad params":     Decode(pool, NewWorkspace(Params{Heads: 3, KVHeads: 2, HeadDim: 64}, 10, 1, 1, nil), out, q, cache, 0, 5, Params{Heads: 3, KVHeads: 2, HeadDim: 64}),
		"rows > batch":   Prefill(pool, ws, out, q, k, v, 5, cache, 0, 0, p),
		"past + rows":    Prefill(pool, ws, out, q, k, v, 4, cache, 0, 7, p),
		"short k":        Prefill(pool, ws, out, q, k[:5], v, 4, cache, 0, 0, p),
		"nil cache":      Decode(pool, ws, out, q, nil, 0, 5, p),
		"wrong kv heads": Decode(pool, ws, out, q, newCache(t, Params{Heads: 4, KVHeads: 4, HeadDim: 64}, kv.Q4, 32, 10, nil, nil, 0), 0, 1, p),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "attention") {
			t.Errorf("%s: error %q lacks context", name, err)
		}
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	// One thread: the pool runs loops inline, so any allocation is ours.
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 128, Scale: 0.09}
	r := rand.New(rand.NewPCG(2, 2))
	k, v := randomKV(r, p, 2000, false)
	pool := testPool(t, 1)
	for _, typ := range kv.Types {
		cache := newCache(t, p, typ, 32, 2000, k, v, 2000)
		ws := NewWorkspace(p, 2000, 8, 1, nil)
		q, out := randomVec(r, 8*p.Heads*p.HeadDim), make([]float32, 8*p.Heads*p.HeadDim)
		if a := testing.AllocsPerRun(3, func() { _ = Decode(pool, ws, out, q, cache, 0, 2000, p) }); a != 0 {
			t.Errorf("%v decode: %v allocations per step", typ, a)
		}
		if a := testing.AllocsPerRun(3, func() { _ = Prefill(pool, ws, out, q, k, v, 8, cache, 0, 1000, p) }); a != 0 {
			t.Errorf("%v prefill: %v allocations per step", typ, a)
		}
	}
}

func TestBaselineMatchesFused(t *testing.T) {
	p := Params{Heads: 8, KVHeads: 2, HeadDim: 128, Scale: 0.09, Window: 700}
	r := rand.New(rand.NewPCG(3, 3))
	k, v := randomKV(r, p, 1000, true)
	pool := testPool(t, 2)
	for _, typ := range kv.Types {
		cache := newCache(t, p, typ, 32, 1000, k, v, 1000)
		b, err := NewDequantBuffers(p, 1000)
		if err != nil {
			t.Fatal(err)
		}
		q, out := randomVec(r, p.Heads*p.HeadDim), make([]float32, p.Heads*p.HeadDim)
		if err := DecodeDequantThenAttend(pool, b, out, q, cache, 0, 1000, p); err != nil {
			t.Fatal(err)
		}
		kSt, vSt := storedKV(cache, 1000)
		if _, rel := headStats(out, decodeReference64(q, kSt, vSt, 1000, p), p.HeadDim); rel > maxStoredRel {
			t.Fatalf("%v: baseline relative error %.3g", typ, rel)
		}
	}
}

func TestLanePermutation(t *testing.T) {
	seen := make([]bool, 256)
	for e := 0; e < 256; e++ {
		l := laneOf(e)
		if l/16 != e/16 || seen[l] {
			t.Fatalf("laneOf(%d) = %d: not a permutation within 16-element runs", e, l)
		}
		seen[l] = true
	}
	if laneOf(2) != 1 || laneOf(1) != 8 || laneOf(33) != 40 {
		t.Fatal("lanes: evens first, then odds")
	}
}
