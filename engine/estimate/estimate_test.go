package estimate

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"nibble/engine/cpu/attention"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/sysmem"
)

func llama8B() Desc {
	return Desc{Name: "llama-8b", Exact: true, WeightsBytes: 4_920_000_000, Params: 8_030_000_000, Runnable: true,
		HParams: model.HParams{Arch: "llama", Layers: 32, Embd: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FF: 14336,
			Vocab: 128256, CtxTrain: 131072, RopeBase: 500000, RopeDims: 128, RopeScale: 1, RMSEps: 1e-5}}
}

// The terms are the allocators' own size functions.
func TestTermsMatchAllocators(t *testing.T) {
	d := llama8B()
	for _, c := range []struct {
		o             Options
		ctx, batch, g int
	}{
		{Options{Ctx: 8192, KV: kv.Q4, Threads: 4}, 8192, 512, 32},
		{Options{Ctx: 100, KV: kv.F16, Batch: 512, Threads: 3}, 100, 100, 32},  // batch clamped to ctx, as the loader does
		{Options{KV: kv.Q8, KVGroup: 64, Batch: 64, Threads: 1}, 4096, 64, 64}, // ctx default min(trained, 4096)
	} {
		e, err := Compute(d, c.o)
		if err != nil {
			t.Fatal(err)
		}
		// On the CPU a quantized cache has its type's default residual window.
		cfg := kv.Config{Type: c.o.KV, GroupSize: c.g, Layers: 32, KVHeads: 8, HeadDim: 128, Ctx: c.ctx, Residual: kv.DefaultResidual(c.o.KV)}
		p := attention.Params{Heads: 32, KVHeads: 8, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
		scratch := model.ActivationBytes(d.HParams, c.batch) + attention.WorkspaceBytes(p, c.ctx, c.batch, c.o.Threads)
		over, _ := RuntimeOverhead("cpu", d.HParams, c.batch)
		if e.Ctx != c.ctx || e.Batch != c.batch || e.KV != cfg.Bytes() || e.Scratch != scratch || e.Overhead != over ||
			e.Total != d.WeightsBytes+cfg.Bytes()+scratch+over || e.Allocated() != e.Total-over {
			t.Errorf("%+v: got %+v, want KV %d scratch %d overhead %d", c.o, e, cfg.Bytes(), scratch, over)
		}
	}
	if _, err := Compute(d, Options{KV: kv.Q4, KVGroup: 48}); err == nil {
		t.Error("group 48 accepted")
	}
	phi := d
	phi.HParams.HeadDim, phi.HParams.RopeDims = 96, 96
	if _, err := Compute(phi, Options{KV: kv.Q4, KVGroup: 64}); err == nil {
		t.Error("head dim 96 with group 64 accepted")
	}
	if _, err := Compute(d, Options{Backend: "tpu"}); err == nil {
		t.Error("unknown backend accepted")
	}
}

func TestVerdictThresholds(t *testing.T) {
	d := llama8B()
	o := Options{Ctx: 8192, KV: kv.F16, Threads: 2}
	e, err := Compute(d, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		budget int64
		want   Verdict
	}{
		{e.Total - 1, WillNotFit},
		{e.Total, Tight},
		{int64(float64(e.Total)/TightFraction) - 1, Tight},
		{int64(float64(e.Total)/TightFraction) + 1, Fits},
		{0, Unknown},
	} {
		got, err := Evaluate(d, o, c.budget)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != c.want {
			t.Errorf("budget %d (total %d): %s, want %s", c.budget, e.Total, got.Verdict, c.want)
		}
	}
}

// MaxContext is the exact boundary: it fits, one more token does not.
func TestMaxContextIsExact(t *testing.T) {
	d := llama8B()
	for _, kt := range kv.Types {
		for _, budget := range []int64{6 << 30, 16 << 30, 64 << 30} {
			o := Options{KV: kt, Threads: 8}
			n := MaxContext(d, o, budget)
			if n <= 0 {
				t.Fatalf("%s %d: no context fits", kt, budget)
			}
			if got := totalAt(d, o, n); got > budget {
				t.Errorf("%s: total at max ctx %d is %d > budget %d", kt, n, got, budget)
			}
			if got := totalAt(d, o, n+1); got <= budget {
				t.Errorf("%s: ctx %d+1 still fits (%d <= %d)", kt, n, got, budget)
			}
		}
	}
	if n := MaxContext(d, Options{}, 4<<30); n != 0 {
		t.Errorf("weights larger than the budget: max ctx %d", n)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"64GiB": 64 << 30, "64G": 64 << 30, "64GB": 64 << 30, "512MiB": 512 << 20, "512m": 512 << 20,
		"1.5GiB": 3 << 29, "100": 100, "2 GiB": 2 << 30, "1T": 1 << 40, "4KiB": 4096,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "12XB", "-5G", "1e400G", "9999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// On a default 64 GiB Mac (48 GiB GPU cap) a model that needs 51 GiB gets
// the exact sysctl; one that needs more than RAM minus the margin does not.
func TestWiredLimitAdvice(t *testing.T) {
	d := llama8B()
	d.WeightsBytes = 50 << 30
	info := sysmem.Info{OS: "darwin", TotalRAM: 64 << 30, AvailableRAM: 60 << 30, WiredLimit: sysmem.DefaultWiredLimit(64 << 30)}
	b := FromSystem(info)
	if b.Bytes != 48<<30 || b.GPUCap != 48<<30 {
		t.Fatalf("budget %+v", b)
	}
	o := Options{Ctx: 8192, KV: kv.F16, Threads: 8}
	e, err := Check(d, o, b)
	if err == nil {
		t.Fatalf("fits: %+v", e)
	}
	need := (e.Total + 1<<29 + 1<<30 - 1) / (1 << 30) * 1024
	want := "sudo sysctl iogpu.wired_limit_mb=" + strconv.FormatInt(need, 10)
	if !strings.Contains(err.Error(), want) || need > 56*1024 || need*(1<<20) < e.Total {
		t.Errorf("advice lacks %q (total %s):\n%v", want, GiB(e.Total), err)
	}
	// Too big to wire safely: no sysctl advice.
	d.WeightsBytes = 58 << 30
	if _, err := Check(d, o, b); err == nil || strings.Contains(err.Error(), "sysctl") {
		t.Errorf("a 58 GiB model on 64 GiB should not get sysctl advice:\n%v", err)
	}
	// A simulation never suggests a sysctl.
	d.WeightsBytes = 50 << 30
	sim := Simulated(48 << 30)
	sim.OS = "darwin"
	if _, err := Check(d, o, sim); err == nil || strings.Contains(err.Error(), "sysctl") {
		t.Errorf("simulated budget got sysctl advice:\n%v", err)
	}
}

// The catalog's smaller file is named with its size and location.
func TestSmallerQuantAdvice(t *testing.T) {
	d := catalogDesc(t, "llama-3.1-70b-instruct")
	o := Options{Ctx: 8192, KV: kv.Q4, Threads: 8}
	_, err := Check(d, o, Simulated(36<<30))
	if err == nil || !strings.Contains(err.Error(), "Q3_K_M (≈ 31.92 GiB, bartowski/Meta-Llama-3.1-70B-Instruct-GGUF/Meta-Llama-3.1-70B-Instruct-Q3_K_M.gguf)") {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(err.Error(), "alone exceed") {
		t.Errorf("should say the weights alone do not fit:\n%v", err)
	}
	// A local file without catalog alternatives: sized from its parameter count.
	d8 := llama8B()
	d8.WeightsBytes = 8_540_000_000 // Q8_0
	_, err = Check(d8, Options{Ctx: 4096, KV: kv.Q4, Threads: 8}, Simulated(6<<30))
	if err == nil || !strings.Contains(err.Error(), "use a smaller quantization: Q5_K_M (≈ 5.33 GiB)") {
		t.Fatalf("%v", err)
	}
}

func TestTightAdvice(t *testing.T) {
	d := llama8B()
	o := Options{Ctx: 32768, KV: kv.F16, Threads: 8}
	e, _ := Compute(d, o)
	b := Simulated(e.Total * 100 / 95) // 95% of the budget
	r, err := NewReport(d, o, b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Chosen().Verdict != Tight || len(r.Advice) == 0 || !strings.Contains(r.Advice[0], "stays under 85%") {
		t.Fatalf("%s %q", r.Chosen().Verdict, r.Advice)
	}
	if _, err := Check(d, o, b); err != nil {
		t.Fatalf("a tight fit is not an error: %v", err)
	}
}
