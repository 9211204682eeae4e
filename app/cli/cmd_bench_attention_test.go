package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchAttentionJSON(t *testing.T) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb}
	code := Run(env, []string{"bench", "attention", "--n", "40,300", "--d", "64", "--hq", "4", "--hkv", "2", "--threads", "1", "--reps", "1", "--json"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep benchAttentionReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if rep.D != 64 || rep.Hq != 4 || rep.Hkv != 2 || rep.Threads != 1 || len(rep.Results) != 2 {
		t.Fatalf("report %+v", rep)
	}
	r := rep.Results[1]
	// 300 positions × 2 kv heads × K and V × (64/2 + 4·64/32) bytes.
	if r.N != 300 || r.Q4Bytes != 300*2*2*40 || r.F16Bytes != 300*2*2*128 || !(r.FusedQ4Ms > 0 && r.DequantQ4Ms > 0 && r.F16Ms > 0 && r.Q8Ms > 0) {
		t.Fatalf("row %+v", r)
	}
	for _, key := range []string{`"fused_q4_ms"`, `"dequant_q4_ms"`, `"f16_ms"`, `"q8_ms"`, `"q4_bytes"`, `"f16_bytes"`, `"threads"`} {
		if !strings.Contains(out.String(), key) {
			t.Fatalf("JSON lacks %s", key)
		}
	}
}

func TestBenchAttentionBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"--n", "0"}, {"--hq", "6", "--hkv", "4"}, {"--d", "100"}, {"--kv-group", "48"}, {"--n", "x"},
	} {
		var out, errb bytes.Buffer
		if code := Run(&Env{Stdout: &out, Stderr: &errb}, append([]string{"bench", "attention"}, args...)); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}
