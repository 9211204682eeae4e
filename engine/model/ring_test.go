package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/internal/testdata"
)

// A state on the CPU keeps Gemma's sliding-window layers in rings of their
// window (64 positions in the test models) and reads them back as the
// unbounded cache does: on the long prompt (738 tokens, eleven times the
// window), prefilled in batches of 64, 100 and all at once (1 and 7: its
// first 200 tokens, three wraps, to keep the test short) and then decoded,
// every step's logits equal those of a cache holding every position
// (LayerWindow all 0) within float rounding, for f16 and for q4 (smoothed,
// rotated; with the default f16 residual window of 64, which then holds
// every position a local layer reads, and with one of 16, so that most
// come from the ring's codes).
func TestRingMatchesFullCache(t *testing.T) {
	dir := filepath.Join(testdata.Dir(t), "families")
	for _, name := range []string{"tiny-gemma2-f16", "tiny-gemma3-f16"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name+".ref", "long.json"))
			if err != nil {
				t.Skipf("skipping: %v", err)
			}
			var ref struct {
				TokenIDs []int32 `json:"token_ids"`
			}
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			b := cpu.New(2)
			defer b.Close()
			m, err := Open(filepath.Join(dir, name+".gguf"), b)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			windows := m.HP.LayerWindows()
			if windows == nil || len(ref.TokenIDs) <= 2*m.HP.Window {
				t.Fatalf("want local layers and a prompt of more than two windows; windows %v, %d tokens", windows, len(ref.TokenIDs))
			}
			for _, c := range []struct {
				kvt      kv.Type
				residual int
				batches  []int
			}{
				{kv.F16, 0, []int{1, 7, 64, 100, len(ref.TokenIDs)}},
				{kv.Q4, 16, []int{1, 7, 64, 100, len(ref.TokenIDs)}},
				{kv.Q4, kv.DefaultResidual(kv.Q4), []int{100}},
			} {
				for _, batch := range c.batches {
					tokens := ref.TokenIDs
					if batch < 64 {
						tokens = tokens[:200]
					}
					t.Run(fmt.Sprintf("%v/residual%d/batch%d", c.kvt, c.residual, batch), func(t *testing.T) {
						compareRing(t, m, tokens, c.kvt, c.residual, batch)
					})
				}
			}
		})
	}
}

// compareRing runs tokens through a ringed and an unbounded cache of type
// kvt (with a residual window of residual positions) and compares the logits after the prompt and after each of a few
// decode steps.
func compareRing(t *testing.T, m *Model, tokens []int32, kvt kv.Type, residual, batch int) {
	const steps = 6
	n := len(tokens)
	cfg := kv.Config{Type: kvt, GroupSize: 32, Ctx: n + steps, Smooth: kvt != kv.F16, Rotate: kvt == kv.Q4, Residual: residual}
	ring, err := m.NewState(cfg, batch)
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	full := cfg
	full.LayerWindow = make([]int, m.HP.Layers)
	unbounded, err := m.NewState(full, batch)
	if err != nil {
		t.Fatal(err)
	}
	defer unbounded.Close()
	rc := ring.Cache.Config()
	if rc.Bytes() >= unbounded.Cache.Config().Bytes() || rc.LayerRing(0) != m.HP.Window {
		t.Fatalf("the ringed cache is %d bytes (layer 0 ring %d), the unbounded one %d", rc.Bytes(), rc.LayerRing(0), unbounded.Cache.Config().Bytes())
	}
	got, want := make([]float32, m.HP.Vocab), make([]float32, m.HP.Vocab)
	worst, worstRel := 1.0, 0.0
	check := func(what string) {
		t.Helper()
		cos, rel := compareLogits(got, want)
		worst, worstRel = min(worst, cos), max(worstRel, rel)
		if !(cos >= 0.999999 || rel <= 1e-5) {
			t.Fatalf("%s: ring vs unbounded logits cosine %.9f, max relative error %.3g", what, cos, rel)
		}
	}
	for pos := 0; pos < n; pos += batch {
		end := min(n, pos+batch)
		if err := ring.Forward(tokens[pos:end], pos, got); err != nil {
			t.Fatal(err)
		}
		if err := unbounded.Forward(tokens[pos:end], pos, want); err != nil {
			t.Fatal(err)
		}
		if pos%(8*batch) == 0 || end == n {
			check(fmt.Sprintf("prefill to %d", end))
		}
	}
	for i := range steps {
		next := argmax(want)
		if err := ring.Forward([]int32{next}, n+i, got); err != nil {
			t.Fatal(err)
		}
		if err := unbounded.Forward([]int32{next}, n+i, want); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("decode step %d", i))
	}
	t.Logf("worst cosine %.9f, max relative error %.3g; cache %d bytes with rings, %d without", worst, worstRel, rc.Bytes(), unbounded.Cache.Config().Bytes())
}

// compareLogits is the cosine of got and want and the largest |got−want|
// relative to want's largest magnitude.
func compareLogits(got, want []float32) (cos, rel float64) {
	var dot, gg, ww, maxDiff, maxWant float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		dot, gg, ww = dot+g*w, gg+g*g, ww+w*w
		maxDiff, maxWant = max(maxDiff, math.Abs(g-w)), max(maxWant, math.Abs(w))
	}
	return dot / math.Sqrt(gg*ww), maxDiff / maxWant
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
