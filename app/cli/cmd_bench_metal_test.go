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
