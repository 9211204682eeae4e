package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func runEstimate(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(&Env{Stdout: &out, Stderr: &errb}, append([]string{"estimate"}, args...))
	return out.String(), errb.String(), code
}

// Open-TQ-Metal's example: Llama-3.1-70B 4-bit on a simulated 64 GiB machine,
// 2 GiB overhead.
func TestEstimateSeed000JSON(t *testing.T) {
	out, errs, code := runEstimate(t, "--catalog", "llama-3.1-70b-instruct-4bit", "--ctx", "131072", "--ram", "64GiB", "--overhead", "2GiB", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Model       string `json:"model"`
		Ctx         int    `json:"ctx"`
		BudgetBytes int64  `json:"budget_bytes"`
		ActiveBytes int64  `json:"active_bytes"`
		Types       map[string]struct {
			WeightsBytes  int64  `json:"weights_bytes"`
			KVBytes       int64  `json:"kv_bytes"`
			ScratchBytes  int64  `json:"scratch_bytes"`
			OverheadBytes int64  `json:"overhead_bytes"`
			TotalBytes    int64  `json:"total_bytes"`
			Verdict       string `json:"verdict"`
			MaxCtx        int    `json:"max_ctx"`
		} `json:"types"`
		Advice []string `json:"advice"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The keys in the documented order.
	last := -1
	for _, k := range []string{`"model"`, `"ctx"`, `"budget_bytes"`, `"types"`, `"f16"`, `"q8"`, `"q4"`, `"advice"`} {
		j := strings.Index(out, k)
		if j <= last {
			t.Errorf("key %s missing or out of order:\n%s", k, out)
		}
		last = j
	}
	if !strings.Contains(out, `"weights_bytes"`) || !strings.Contains(out, `"max_ctx"`) {
		t.Errorf("field names: %s", out)
	}
	const gib = 1 << 30
	if doc.Ctx != 131072 || doc.BudgetBytes != 64*gib || len(doc.Types) != 3 {
		t.Fatalf("%+v", doc)
	}
	f16, q4 := doc.Types["f16"], doc.Types["q4"]
	// The paper's 12.5 GiB of int4 KV plus, on the CPU, the default f16
	// residual window's ring: 80 layers · 8 kv heads · 2 planes · 64 · 2·128 bytes.
	if f16.KVBytes != 40*gib || q4.KVBytes != 12.5*gib+80*8*2*64*2*128 || f16.OverheadBytes != 2*gib {
		t.Errorf("KV f16 %d q4 %d overhead %d", f16.KVBytes, q4.KVBytes, f16.OverheadBytes)
	}
	if f16.Verdict != "will-not-fit" || q4.Verdict != "fits" {
		t.Errorf("verdicts %s %s", f16.Verdict, q4.Verdict)
	}
	if math.Abs(float64(q4.TotalBytes)/gib-53.6) > 0.536 {
		t.Errorf("q4 total %.2f GiB, want ≈ 53.6", float64(q4.TotalBytes)/gib)
	}
	if math.Abs(float64(f16.MaxCtx)-74750) > 0.02*74750 || math.Abs(float64(q4.MaxCtx)-241660) > 0.02*241660 {
		t.Errorf("max ctx f16 %d q4 %d", f16.MaxCtx, q4.MaxCtx)
	}
	if len(doc.Advice) == 0 || !strings.Contains(doc.Advice[0], "--kv f16") {
		t.Errorf("advice %q", doc.Advice)
	}
}

// The advice names q4's cache as its column does (with the residual
// window), not as f16's options would size it.
func TestEstimateHuman(t *testing.T) {
	out, errs, code := runEstimate(t, "--catalog", "llama-3.1-70b-instruct-4bit", "--ctx", "131072", "--ram", "64GiB", "--overhead", "2GiB", "--kv", "f16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"[f16]", "40.00 GiB", "12.52 GiB", "will-not-fit", "advice (for --kv f16)", "--ctx 74", "--kv q4 needs 12.52 GiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A mixture of experts: the verdict counts every expert (resident), and a
// line says what a token reads.
func TestEstimateMixture(t *testing.T) {
	out, errs, code := runEstimate(t, "--catalog", "qwen3-30b-a3b", "--ctx", "4096", "--ram", "16GiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"128 experts (8 per token)", "weights   17.28 GiB resident, ≈ 1.87 GiB read per token (8 of 128 experts)", "will-not-fit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runEstimate(t, "--catalog", "qwen3-30b-a3b", "--ram", "16GiB", "--json")
	var doc struct {
		Active  int64 `json:"active_bytes"`
		Experts int   `json:"experts"`
		Used    int   `json:"experts_used"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Experts != 128 || doc.Used != 8 || doc.Active <= 0 || doc.Active > 18556685824/8 {
		t.Errorf("JSON %+v (%v):\n%s", doc, err, out)
	}
}

func TestEstimateUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--catalog", "x", "-m", "y.gguf"},
		{"--catalog", "llama-3.2-1b-instruct", "--kv", "q5"},
		{"--catalog", "llama-3.2-1b-instruct", "--ram", "lots"},
		{"--catalog", "llama-3.2-1b-instruct", "--kv-group", "16"},
		{"--catalog", "no-such-model"},
		{"--catalog", "llama-3.2-1b-instruct", "--backend", "tpu"},
	} {
		if _, _, code := runEstimate(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if _, errs, code := runEstimate(t, "-m", "/nonexistent.gguf"); code != 1 || !strings.Contains(errs, "nonexistent") {
		t.Errorf("missing file: exit %d %s", code, errs)
	}
}
