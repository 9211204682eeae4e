package estimate

import (
	"math"
	"strings"
	"testing"

	"nibble/catalog"
	"nibble/engine/kv"
)

const gib = 1 << 30

func catalogDesc(t *testing.T, id string) Desc {
	t.Helper()
	m, err := catalog.ByID(id)
	if err != nil {
		t.Fatal(err)
	}
	d, err := FromCatalog(m, "")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*math.Abs(want) }

// Open-TQ-Metal's table: Llama-3.1-70B 4-bit (39.1 GiB) on a 64 GiB Mac with
// 2 GiB of overhead, 128K context.
func TestSeed000(t *testing.T) {
	d := catalogDesc(t, "llama-3.1-70b-instruct-4bit")
	if d.WeightsBytes != int64(math.Round(39.1*gib)) || !d.Exact {
		t.Fatalf("weights %d exact %v", d.WeightsBytes, d.Exact)
	}
	b := Simulated(64 * gib)
	// The paper's cache has no f16 residual window (neither has Nibble's on
	// Metal); the CPU's default one is checked at the end.
	o := Options{Ctx: 131072, Overhead: 2 * gib, Threads: 8, KVResidual: -1}
	for _, c := range []struct {
		kv            kv.Type
		kvGiB         float64
		weightsPlusKV float64 // the paper's "total" column for f16 omits the overhead
		total         float64
		verdict       Verdict
		maxCtx        float64
	}{
		{kv.F16, 40, 79.1, 81.1, WillNotFit, 74750},
		{kv.Q4, 12.5, 51.6, 53.6, Fits, 241660},
	} {
		o.KV = c.kv
		e, err := Evaluate(d, o, b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if e.KV != int64(c.kvGiB*gib) {
			t.Errorf("%s: KV %s, want exactly %.1f GiB", c.kv, GiB(e.KV), c.kvGiB)
		}
		if wkv := float64(e.Weights+e.KV) / gib; math.Abs(wkv-c.weightsPlusKV) > 0.01 {
			t.Errorf("%s: weights+KV %.3f GiB, want %.1f", c.kv, wkv, c.weightsPlusKV)
		}
		// The scratch (activations at batch 512 + attention workspace) must
		// stay small for Open-TQ-Metal's arithmetic to hold.
		if e.Scratch > gib/4 {
			t.Errorf("%s: scratch %s is not small", c.kv, GiB(e.Scratch))
		}
		if tot := float64(e.Total) / gib; !within(tot, c.total, 0.01) {
			t.Errorf("%s: total %.3f GiB, want ≈ %.1f", c.kv, tot, c.total)
		}
		if e.Verdict != c.verdict {
			t.Errorf("%s: verdict %s, want %s", c.kv, e.Verdict, c.verdict)
		}
		if !within(float64(e.MaxCtx), c.maxCtx, 0.02) {
			t.Errorf("%s: max ctx %d, want %.0f ± 2%%", c.kv, e.MaxCtx, c.maxCtx)
		}
		t.Logf("%s: weights %s KV %s scratch %s (%d MiB) overhead %s total %s %s max ctx %d",
			c.kv, GiB(e.Weights), GiB(e.KV), GiB(e.Scratch), e.Scratch>>20, GiB(e.Overhead), GiB(e.Total), e.Verdict, e.MaxCtx)
	}

	// The f16 refusal carries the estimate and concrete advice.
	o.KV = kv.F16
	e, err := Check(d, o, b)
	nf, ok := err.(*NotFitError)
	if !ok || nf.Estimate != e || e.Verdict != WillNotFit {
		t.Fatalf("Check: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"does not fit", "--ctx 7", "--kv q4", "12.50 GiB", "fits"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	t.Logf("\n%s", msg)
	o.KV = kv.Q4
	if _, err := Check(d, o, b); err != nil {
		t.Fatalf("q4 should fit: %v", err)
	}
	// The CPU's default residual window adds its f16 ring and nothing else:
	// layers·kv heads·2·W·2·D bytes, 20 MiB here.
	plain, err := Compute(d, o)
	if err != nil {
		t.Fatal(err)
	}
	o.KVResidual = 0
	windowed, err := Compute(d, o)
	if err != nil {
		t.Fatal(err)
	}
	hp := d.HParams
	if ring := int64(hp.Layers * hp.KVHeads * 2 * kv.DefaultResidual(kv.Q4) * 2 * hp.HeadDim); windowed.KV-plain.KV != ring || windowed.Total-plain.Total != ring {
		t.Errorf("default residual window adds KV %d, total %d bytes, want %d", windowed.KV-plain.KV, windowed.Total-plain.Total, ring)
	}
}
