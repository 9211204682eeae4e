package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
	for _, bad := range [][]string{{"--experts-used", "65"}, {"--expert-ffn", "0"}, {"--expert-weights", "Q9"}} {
		if rc := Run(env, append(append([]string{}, moe...), bad...)); rc != 2 {
			t.Errorf("%v: rc %d, want 2", bad, rc)
		}
	}
}
