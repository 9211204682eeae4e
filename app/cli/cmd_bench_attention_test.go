package cli

import (
	"bytes"
	"encoding/json"
	"math"
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
	for _, key := range []string{`"fused_q4_ms"`, `"dequant_q4_ms"`, `"f16_ms"`, `"q8_ms"`, `"q4_bytes"`, `"f16_bytes"`, `"threads"`,
		`"overhead"`, `"plain_ms"`, `"rot_ms"`, `"export_ms"`, `"rot_export_ms"`, `"rot_ratio"`, `"export_ratio"`, `"rot_export_ratio"`} {
		if !strings.Contains(out.String(), key) {
			t.Fatalf("JSON lacks %s", key)
		}
	}
	for _, r := range rep.Results {
		o := r.Overhead
		if o == nil {
			t.Fatalf("n=%d: no overhead timings by default", r.N)
		}
		// The plain time is the row's fused q4 time; each ratio is its time over it.
		if o.PlainMs != r.FusedQ4Ms || !(o.RotMs > 0 && o.ExportMs > 0 && o.RotExportMs > 0) ||
			!near(o.RotRatio, o.RotMs/o.PlainMs) || !near(o.ExportRatio, o.ExportMs/o.PlainMs) || !near(o.RotExportRatio, o.RotExportMs/o.PlainMs) {
			t.Fatalf("n=%d: overhead %+v against fused q4 %g ms", r.N, *o, r.FusedQ4Ms)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }

// A head dim that is not a power of two times its rotation too (the
// general transform).
func TestBenchAttentionHeadDim96(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(&Env{Stdout: &out, Stderr: &errb}, []string{"bench", "attention", "--n", "64", "--d", "96", "--hq", "4", "--hkv", "2", "--threads", "1", "--reps", "1", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep benchAttentionReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.D != 96 || len(rep.Results) != 1 || rep.Results[0].Overhead == nil || !(rep.Results[0].Overhead.RotMs > 0) {
		t.Fatalf("report %s (err %v)", out.String(), err)
	}
}

// --overhead=false drops the rotation/export variants from the JSON and the
// table; by default the table prints them with their ratios.
func TestBenchAttentionOverheadFlag(t *testing.T) {
	args := []string{"bench", "attention", "--n", "64", "--d", "64", "--hq", "4", "--hkv", "1", "--threads", "1", "--reps", "1"}
	var out, errb bytes.Buffer
	if code := Run(&Env{Stdout: &out, Stderr: &errb}, append(append([]string{}, args...), "--overhead=false", "--json")); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), `"overhead"`) {
		t.Fatalf("--overhead=false still reports overhead: %s", out.String())
	}
	out.Reset()
	if code := Run(&Env{Stdout: &out, Stderr: &errb}, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"K rotation and score export", "rot+export", "rot/q4", "exp/q4", "rot+exp/q4"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchAttentionBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"--n", "0"}, {"--hq", "6", "--hkv", "4"}, {"--d", "100"}, {"--kv-group", "48"}, {"--n", "x"}, {"--d", "520"},
	} {
		var out, errb bytes.Buffer
		if code := Run(&Env{Stdout: &out, Stderr: &errb}, append([]string{"bench", "attention"}, args...)); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}
