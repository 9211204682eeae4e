package cpu

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/kv"
)

func f32Weight(t *testing.T, b *Backend, v []float32) backend.Weight {
	region := make([]byte, 4*len(v))
	copy(bytesAsFloats(region), v)
	m, err := b.MapWeights(region, []backend.WeightDesc{{Name: "w", Type: ggml.F32, Rows: 1, Cols: len(v)}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Weights()[0]
}

func TestAllocCountsAndZeroesOnAndOffHeap(t *testing.T) {
	b := New(2)
	small, large := b.Alloc(10).(*Tensor), b.Alloc(offHeapMin).(*Tensor)
	if len(small.D) != 10 || len(large.D) != offHeapMin {
		t.Fatalf("lengths %d %d", len(small.D), len(large.D))
	}
	for _, v := range large.D {
		if v != 0 {
			t.Fatal("off-heap tensor not zeroed")
		}
	}
	large.D[len(large.D)-1] = 1 // writable
	if got, want := b.AllocatedBytes(), int64(4*10+4*offHeapMin); got != want {
		t.Fatalf("allocated %d, want %d", got, want)
	}
	if len(b.mappings) != 1 {
		t.Fatalf("%d off-heap mappings, want 1", len(b.mappings))
	}
	b.Close()
	if b.mappings != nil {
		t.Fatal("Close kept mappings")
	}
}

func TestRMSNormAndSwiGLU(t *testing.T) {
	b := New(2)
	defer b.Close()
	x, out := b.Alloc(4).(*Tensor), b.Alloc(4).(*Tensor)
	copy(x.D, []float32{1, 2, 3, 4})
	b.RMSNorm(out, x, f32Weight(t, b, []float32{1, 1, 2, 2}), 0, 1)
	rms := math.Sqrt((1 + 4 + 9 + 16) / 4.0)
	for i, want := range []float64{1 / rms, 2 / rms, 6 / rms, 8 / rms} {
		if math.Abs(float64(out.D[i])-want) > 1e-6 {
			t.Fatalf("rms_norm[%d] = %g, want %g", i, out.D[i], want)
		}
	}
	g, u := b.Alloc(2).(*Tensor), b.Alloc(2).(*Tensor)
	copy(g.D, []float32{0, 2})
	copy(u.D, []float32{5, 3})
	b.SwiGLU(g, g, u, 2)
	if want := 2 / (1 + math.Exp(-2)) * 3; g.D[0] != 0 || math.Abs(float64(g.D[1])-want) > 1e-6 {
		t.Fatalf("swiglu = %v, want [0 %g]", g.D, want)
	}
}

// RoPE rotates adjacent pairs (llama) or half-split pairs (neox) by
// pos·base^(-2i/d), divided by the per-pair frequency factors.
func TestRoPEModes(t *testing.T) {
	b := New(1)
	defer b.Close()
	for _, neox := range []bool{false, true} {
		x := b.Alloc(4).(*Tensor)
		copy(x.D, []float32{1, 0, 1, 0})
		r := &backend.RoPE{Neox: neox, Dims: 4, Base: 100, FreqFactors: []float32{1, 2}}
		b.RoPE(x, 1, 4, 1, []int32{3}, r)
		th0, th1 := 3.0, 3.0*math.Pow(100, -0.5)/2
		var want []float64
		if neox { // pairs (0,2) = (1,1) turned by th0, and (1,3) = (0,0)
			want = []float64{math.Cos(th0) - math.Sin(th0), 0, math.Sin(th0) + math.Cos(th0), 0}
		} else { // pairs (0,1) and (2,3)
			want = []float64{math.Cos(th0), math.Sin(th0), math.Cos(th1), math.Sin(th1)}
		}
		for i := range want {
			if math.Abs(float64(x.D[i])-want[i]) > 1e-6 {
				t.Fatalf("neox=%v: %v, want %v", neox, x.D, want)
			}
		}
	}
}

// Kernel errors from two goroutines and Sync do not race (go test -race).
func TestErrorFieldIsSafeForConcurrentUse(t *testing.T) {
	b := New(1)
	defer b.Close()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				b.fail(fmt.Errorf("goroutine %d error %d", g, i))
				_ = b.Sync()
			}
		}()
	}
	wg.Wait()
}

// Free and a closed cache give their bytes back to the count.
func TestFreeReturnsToBaseline(t *testing.T) {
	b := New(1)
	defer b.Close()
	x := b.Alloc(1 << 20) // off the heap
	y := b.Alloc(16)
	b.Free(x)
	b.Free(y)
	b.Free(x) // twice is harmless
	if n := b.AllocatedBytes(); n != 0 || len(b.mappings) != 0 {
		t.Fatalf("after Free: %d bytes counted, %d mappings", n, len(b.mappings))
	}
}

// MapWeights refuses, when the model is mapped, any descriptor an op could
// not use: an unsupported type, partial blocks, bytes outside the region.
func TestMapWeightsChecksEveryDescriptor(t *testing.T) {
	b := New(1)
	defer b.Close()
	region := make([]byte, 4096)
	ok := backend.WeightDesc{Name: "ok", Type: ggml.Q4_0, Rows: 4, Cols: 64, Offset: 100}
	m, err := b.MapWeights(region, []backend.WeightDesc{ok, {Name: "f", Type: ggml.F32, Rows: 2, Cols: 3, Offset: 4072}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Weights(); len(got) != 2 || got[0].Desc() != ok || got[1].Desc().Name != "f" {
		t.Fatalf("handles %v", got)
	}
	if mat := matrix(m.Weights()[0]); &mat.Data[0] != &region[100] || len(mat.Data) != 4*36 {
		t.Fatal("the handle does not view the region in place")
	}
	if err := m.Close(); err != nil || m.Close() != nil {
		t.Fatal("Close", err)
	}
	for _, c := range []struct {
		d    backend.WeightDesc
		want string
	}{
		{backend.WeightDesc{Name: "iq", Type: ggml.IQ2_XXS, Rows: 1, Cols: 256}, `"iq" has type IQ2_XXS, which the cpu backend cannot compute with`},
		{backend.WeightDesc{Name: "part", Type: ggml.Q4_0, Rows: 1, Cols: 48}, `"part": 1×48 is not a matrix of whole Q4_0 blocks`},
		{backend.WeightDesc{Name: "empty", Type: ggml.F32, Rows: 0, Cols: 4}, `"empty": 0×4`},
		{backend.WeightDesc{Name: "past", Type: ggml.F32, Rows: 2, Cols: 4, Offset: 4072}, `"past": 32 bytes at offset 4072 run past the region of 4096 bytes`},
		{backend.WeightDesc{Name: "neg", Type: ggml.F32, Rows: 1, Cols: 4, Offset: -4}, `"neg": 16 bytes at offset -4`},
		{backend.WeightDesc{Name: "huge", Type: ggml.F32, Rows: 1 << 40, Cols: 1 << 30}, `"huge": 1099511627776 rows of 1073741824 elements is too large`},
	} {
		if _, err := b.MapWeights(region, []backend.WeightDesc{ok, c.d}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.d.Name, err, c.want)
		}
	}
}

// The footprint the estimator reads is what NewKVCache allocates besides
// the cache, for every cache type and a few geometries.
func TestFootprintIsWhatNewKVCacheAllocates(t *testing.T) {
	f, err := backend.FootprintOf("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 3} {
		b := New(threads)
		for _, c := range []struct{ heads, kvHeads, d, ctx, batch int }{{8, 2, 64, 100, 16}, {32, 8, 128, 5000, 512}, {4, 4, 256, 300, 0}} {
			for _, typ := range kv.Types {
				cfg := kv.Config{Type: typ, GroupSize: 32, Layers: 3, KVHeads: c.kvHeads, HeadDim: c.d, Ctx: c.ctx}
				before := b.AllocatedBytes()
				cache, err := b.NewKVCache(cfg, c.heads, c.batch)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := b.AllocatedBytes()-before, cfg.Bytes()+f.WorkspaceBytes(cfg, c.heads, c.batch, threads); got != want {
					t.Errorf("threads %d %+v %v: NewKVCache counted %d bytes, footprint says %d", threads, c, typ, got, want)
				}
				cache.Close()
			}
		}
		b.Close()
	}
	if _, err := backend.FootprintOf("tpu"); err == nil || !strings.Contains(err.Error(), `no backend "tpu" in this build (have cpu`) {
		t.Fatalf("unknown backend: %v", err)
	}
}
