package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"nibble/engine/kv"
	"nibble/metal/traffic"
)

func TestBenchMetalModel(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb}
	if rc := Run(env, []string{"bench", "metal-model", "--catalog", "llama-3.1-70b-instruct", "--ctx", "131072", "--kv", "q4", "--json"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var r metalModelReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	// One 70B layer at 128K, q4 gs32: 8 kv heads × 128K × (64 + 16) bytes × 2.
	if kvb := int64(2 * 8 * 131072 * 80); r.AttnLayer.Kernels[0].Read < kvb || r.AttnLayer.Kernels[0].Read > kvb+kvb/100 {
		t.Errorf("attention layer reads %d bytes, want about %d", r.AttnLayer.Kernels[0].Read, kvb)
	}
	if len(r.Devices) != 15 || r.Step.Read <= 0 {
		t.Errorf("%d devices, %d bytes", len(r.Devices), r.Step.Read)
	}
	for _, args := range [][]string{
		{"--kv", "q5"}, {"--ctx", "0"}, {"--catalog", "nope"}, {"--heads", "12", "--kv-heads", "8"}, {"--device", "M9"},
	} {
		out.Reset()
		errb.Reset()
		if rc := Run(env, append([]string{"bench", "metal-model"}, args...)); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (%s)", args, rc, errb.String())
		}
	}
	out.Reset()
	if rc := Run(env, []string{"bench", "metal-model", "--catalog", "llama-3.1-70b-instruct", "--kv", "f16", "--device", "M1 Max"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "M1 Max") {
		t.Errorf("no M1 Max row:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// A mixture of experts: the step reads the chosen experts only, and the
// report gives the resident and the active weights.
func TestBenchMetalModelMoE(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb}
	moe := []string{"bench", "metal-model", "--layers", "8", "--hidden", "2048", "--heads", "32", "--kv-heads", "4", "--head-dim", "128",
		"--ffn", "0", "--vocab", "151936", "--weights", "Q4_0", "--output", "Q4_0", "--experts", "64", "--experts-used", "8",
		"--expert-ffn", "768", "--ctx", "4096", "--device", "M1 Max"}
	if rc := Run(env, append(moe, "--json")); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var r metalModelReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.ActiveWeights <= 0 || r.ResidentWeights < 4*r.ActiveWeights || r.Step.Read > r.ActiveWeights+r.ActiveWeights/10 {
		t.Errorf("resident %d, active %d, step reads %d", r.ResidentWeights, r.ActiveWeights, r.Step.Read)
	}
	out.Reset()
	if rc := Run(env, moe); rc != 0 || !strings.Contains(out.String(), "MB active") || !strings.Contains(out.String(), "mul_mv_id_q4_0") {
		t.Errorf("rc %d:\n%s", rc, out.String())
	}
	t.Logf("\n%s", out.String())
	// The catalog's Qwen3-30B-A3B: 8 of 128 experts a token.
	out.Reset()
	if rc := Run(env, []string{"bench", "metal-model", "--catalog", "qwen3-30b-a3b", "--ctx", "4096", "--json"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	r = metalModelReport{}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Shape.Experts != 128 || r.Shape.ExpertsUsed != 8 || r.Shape.FFN != 0 || r.ResidentWeights < 8*r.ActiveWeights {
		t.Errorf("qwen3-30b-a3b: shape %+v, resident %d, active %d", r.Shape, r.ResidentWeights, r.ActiveWeights)
	}
	for _, bad := range [][]string{{"--experts-used", "65"}, {"--expert-ffn", "0"}, {"--expert-weights", "Q9"}} {
		if rc := Run(env, append(append([]string{}, moe...), bad...)); rc != 2 {
			t.Errorf("%v: rc %d, want 2", bad, rc)
		}
	}
}

// A Gemma 4 from the catalog: each layer in its own head shape (sliding
// 16 × 256 over a 1024-token window, global 4 × 512 over the context), the
// one-layer attention figure a global layer's, and the text names both.
func TestBenchMetalModelGemma4(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb}
	if rc := Run(env, []string{"bench", "metal-model", "--catalog", "gemma-4-31b-it", "--ctx", "32768", "--kv", "q4", "--json"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var r metalModelReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Shape.PerLayer) != 60 || r.Shape.Layer(5) != (traffic.Layer{KVHeads: 4, HeadDim: 512}) ||
		r.Shape.Layer(0) != (traffic.Layer{KVHeads: 16, HeadDim: 256, Window: 1024}) || r.Shape.FFN != 21504 {
		t.Fatalf("shape %+v", r.Shape)
	}
	var global traffic.Step
	global.Attention(32, 4, 512, 32768, 32768, traffic.Cache{Type: kv.Q4, GroupSize: 32})
	// q4 gs32: 512 × (0.5 + 4/32) bytes per head and position, K and V (read
	// once per threadgroup column of the 8 query heads of a kv head).
	if kvb := int64(2 * 4 * 32768 * 320); r.AttnLayer.Read != global.Read || global.Kernels[0].Read < kvb {
		t.Errorf("attention layer reads %d bytes, a global layer %d (its K/V %d)", r.AttnLayer.Read, global.Read, kvb)
	}
	out.Reset()
	if rc := Run(env, []string{"bench", "metal-model", "--catalog", "gemma-4-e4b-it", "--device", "M4 Max"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if want := "layers: 20 × 2/256 window 512, 4 × 2/512, 15 × 2/256 window 512 sharing K/V, 3 × 2/512 sharing K/V"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
	t.Logf("\n%s", out.String())
}
