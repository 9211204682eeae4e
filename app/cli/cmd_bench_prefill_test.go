package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"nibble/internal/testdata"
)

// A canned record as llama-bench -o json prints it (fields trimmed to a
// representative set), with a tg record that must be skipped.
const cannedLlamaBench = `[
  {
    "build_commit": "e4868d16",
    "build_number": 5970,
    "cpu_info": "Intel(R) Xeon(R) Processor",
    "backends": "CPU",
    "model_filename": "llama-1b-q4_0.gguf",
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 2,
    "type_k": "f16",
    "n_prompt": 0,
    "n_gen": 128,
    "avg_ts": 20.5,
    "samples_ns": [ 6243902439 ],
    "samples_ts": [ 20.5 ]
  },
  {
    "build_commit": "e4868d16",
    "build_number": 5970,
    "n_threads": 2,
    "n_prompt": 512,
    "n_gen": 0,
    "avg_ns": 5000000000,
    "avg_ts": 102.4,
    "stddev_ts": 1.5,
    "samples_ns": [ 5000000000, 4900000000, 5100000000 ],
    "samples_ts": [ 102.4, 104.5, 100.4 ]
  }
]
`

func TestParseLlamaBench(t *testing.T) {
	samples, build, err := parseLlamaBench([]byte(cannedLlamaBench), 512)
	if err != nil {
		t.Fatal(err)
	}
	if build != "e4868d16" || len(samples) != 3 || samples[0] != 102.4 || samples[2] != 100.4 {
		t.Fatalf("samples %v build %q", samples, build)
	}
	if med := median(samples); med != 102.4 {
		t.Fatalf("median %g", med)
	}
	if _, _, err := parseLlamaBench([]byte(cannedLlamaBench), 128); err == nil || !strings.Contains(err.Error(), "no pp128 record") {
		t.Fatalf("pp128: err %v", err)
	}
	if _, _, err := parseLlamaBench([]byte("main: error: failed to load model"), 512); err == nil {
		t.Fatal("non-JSON output accepted")
	}
	// A build that prints only the mean.
	if s, _, err := parseLlamaBench([]byte(`[{"n_prompt": 64, "n_gen": 0, "avg_ts": 55.5}]`), 64); err != nil || len(s) != 1 || s[0] != 55.5 {
		t.Fatalf("mean only: %v %v", s, err)
	}
}

func tinyQ4Model(t *testing.T) string {
	return filepath.Join(testdata.Dir(t), "models", "tiny-llama-spm-q4_0.gguf")
}

func TestBenchPrefillJSON(t *testing.T) {
	model := tinyQ4Model(t)
	out, stderr, code := runCLI(t, "bench", "prefill", "-m", model, "--pp", "40", "--reps", "3", "--threads", "2", "--backend", "cpu", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep benchPrefillReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if rep.PP != 40 || rep.Threads != 2 || rep.KV != "f16" || len(rep.NibbleSamples) != 3 || !(rep.NibbleTokS > 0) {
		t.Fatalf("report %+v", rep)
	}
	if rep.LlamaTokS != 0 || rep.Ratio != 0 || strings.Contains(out, "llama_tok_s") {
		t.Fatalf("llama figures without --llama-bench: %s", out)
	}
}

// A stand-in llama-bench that prints the canned JSON: the command runs it
// once per repetition and divides the medians.
func TestBenchPrefillWithLlamaBench(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	model := tinyQ4Model(t)
	dir := t.TempDir()
	canned := filepath.Join(dir, "out.json")
	if err := os.WriteFile(canned, []byte(strings.ReplaceAll(cannedLlamaBench, `"n_prompt": 512`, `"n_prompt": 32`)), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "llama-bench")
	script := "#!/bin/sh\necho \"$@\" >> " + filepath.Join(dir, "args") + "\ncat " + canned + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "bench", "prefill", "-m", model, "--pp", "32", "--reps", "2", "--threads", "1", "--backend", "cpu", "--llama-bench", fake, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep benchPrefillReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// Two runs of three samples each; median 102.4.
	if len(rep.LlamaSamples) != 6 || rep.LlamaTokS != 102.4 || rep.LlamaBuild != "e4868d16" {
		t.Fatalf("report %+v", rep)
	}
	if want := rep.NibbleTokS / 102.4; rep.Ratio != want {
		t.Fatalf("ratio %g, want %g", rep.Ratio, want)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := "-m " + model + " -p 32 -n 0 -t 1 -r 1 -o json"
	if lines := strings.Split(strings.TrimSpace(string(args)), "\n"); len(lines) != 2 || lines[0] != wantArgs {
		t.Fatalf("llama-bench called with %q, want twice %q", args, wantArgs)
	}

	// A failing llama-bench is an error that says which.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'failed to load model' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "bench", "prefill", "-m", model, "--pp", "32", "--reps", "1", "--threads", "1", "--backend", "cpu", "--llama-bench", fake)
	if code == 0 || !strings.Contains(stderr, "failed to load model") {
		t.Fatalf("failing llama-bench: exit %d, stderr %s", code, stderr)
	}
}

func TestBenchPrefillBadArgs(t *testing.T) {
	for _, args := range [][]string{{}, {"-m", "x.gguf", "--pp", "0"}, {"-m", "x.gguf", "--reps", "0"}, {"-m", "x.gguf", "--kv", "q3"}} {
		if _, stderr, code := runCLI(t, append([]string{"bench", "prefill"}, args...)...); code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

// bench decode --llama-bench: a stand-in prints a tg record; the command
// runs it after each repetition at the same cache depth (-d, prompt
// included) and reports the medians' ratio.
func TestBenchDecodeWithLlamaBench(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	model := tinyQ4Model(t)
	dir := t.TempDir()
	canned := filepath.Join(dir, "out.json")
	tgRecord := strings.ReplaceAll(cannedLlamaBench, `"n_gen": 128`, `"n_gen": 8`)
	if err := os.WriteFile(canned, []byte(tgRecord), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "llama-bench")
	script := "#!/bin/sh\necho \"$@\" >> " + filepath.Join(dir, "args") + "\ncat " + canned + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "bench", "decode", "-m", model, "--pp", "16", "--tg", "8", "--reps", "2", "--threads", "1", "--backend", "cpu", "--llama-bench", fake, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Results []benchDecodeResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("results %+v", rep.Results)
	}
	r := rep.Results[0]
	if r.KV != "f16" || r.LlamaTokS != 20.5 || len(r.LlamaSamples) != 2 || len(r.DecodeSamples) != 2 || r.LlamaBuild != "e4868d16" || r.Ratio != r.DecodeTokS/20.5 {
		t.Fatalf("result %+v", r)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := "-m " + model + " -p 0 -n 8 -t 1 -r 1 -o json -d 16"
	if lines := strings.Split(strings.TrimSpace(string(args)), "\n"); len(lines) != 2 || lines[0] != wantArgs {
		t.Fatalf("llama-bench called with %q, want twice %q", args, wantArgs)
	}
	if _, stderr, code := runCLI(t, "bench", "decode", "-m", model, "--kv", "f16,q8", "--backend", "cpu", "--llama-bench", fake); code != 2 {
		t.Fatalf("two KV types with --llama-bench: exit %d (%s)", code, stderr)
	}
}
