package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nibble/engine/ggml"
	"nibble/internal/testdata"
	"nibble/internal/testmodel"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(&Env{Stdout: &out, Stderr: &errb}, args)
	return out.String(), errb.String(), code
}

type refJSON struct {
	Prompt string         `json:"prompt"`
	Tokens []int32        `json:"tokens"`
	Top    [][][2]float64 `json:"top"`
	Greedy []int32        `json:"greedy"`
}

func readRef(t *testing.T, td, model string) refJSON {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(td, "models", strings.TrimSuffix(model, ".gguf")+".ref", "short.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r refJSON
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTokenizeLogitsRunJSON(t *testing.T) {
	td := testdata.Dir(t)
	const model = "tiny-llama-spm-f16.gguf"
	path := filepath.Join(td, "models", model)
	ref := readRef(t, td, model)

	out, stderr, code := runCLI(t, "tokenize", "-m", path, ref.Prompt, "--json")
	if code != 0 {
		t.Fatalf("tokenize exit %d: %s", code, stderr)
	}
	var tok struct{ Tokens []int32 }
	if err := json.Unmarshal([]byte(out), &tok); err != nil || !slices.Equal(tok.Tokens, ref.Tokens) {
		t.Fatalf("tokenize --json = %s (err %v), want tokens %v", out, err, ref.Tokens)
	}

	out, stderr, code = runCLI(t, "logits", "-m", path, "--prompt", ref.Prompt, "--kv", "f16", "--json")
	if code != 0 {
		t.Fatalf("logits exit %d: %s", code, stderr)
	}
	var lg struct {
		Tokens []int32
		Top    [][2]float64
	}
	if err := json.Unmarshal([]byte(out), &lg); err != nil {
		t.Fatal(err)
	}
	last := ref.Top[len(ref.Top)-1]
	if len(lg.Top) != 20 || int(lg.Top[0][0]) != int(last[0][0]) || !slices.Equal(lg.Tokens, ref.Tokens) {
		t.Fatalf("logits top %v, want 20 entries led by %v", lg.Top, last[0])
	}
	for i, e := range last {
		if d := lg.Top[i][1] - e[1]; d > 0.1 || d < -0.1 {
			t.Errorf("top[%d] = %v, llama.cpp %v", i, lg.Top[i], e)
		}
	}

	out, stderr, code = runCLI(t, "run", "-m", path, "-p", ref.Prompt, "-n", "24", "--temp", "0", "--kv", "f16", "--json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var rr runResult
	if err := json.Unmarshal([]byte(out), &rr); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rr.Tokens, ref.Greedy) || rr.PromptTokens != len(ref.Tokens) || rr.GenTokens != 24 || rr.DecodeTokS <= 0 || rr.PrefillTokS <= 0 {
		t.Fatalf("run --json = %+v, want llama.cpp's greedy tokens %v", rr, ref.Greedy)
	}
}

func TestBenchDecodeAndKVCheckJSON(t *testing.T) {
	td := testdata.Dir(t)
	path := filepath.Join(td, "models", "tiny-qwen2-q4_0.gguf")
	out, stderr, code := runCLI(t, "bench", "decode", "-m", path, "--depth", "0,64", "--pp", "16", "--tg", "8", "--threads", "2", "--json")
	if code != 0 {
		t.Fatalf("bench decode exit %d: %s", code, stderr)
	}
	var bd struct {
		Model   string
		Threads int
		Results []benchDecodeResult
	}
	if err := json.Unmarshal([]byte(out), &bd); err != nil || bd.Threads != 2 || len(bd.Results) != 2 || bd.Results[1].Depth != 64 || bd.Results[1].DecodeTokS <= 0 {
		t.Fatalf("bench decode --json = %s (err %v)", out, err)
	}

	prompt := filepath.Join(td, "long_prompt.txt")
	out, stderr, code = runCLI(t, "kvcheck", "-m", path, "--prompt-file", prompt, "--batch", "64", "--greedy", "8", "--json")
	if code != 0 {
		t.Fatalf("kvcheck exit %d: %s", code, stderr)
	}
	type quality struct {
		Cosine        float64 `json:"cosine"`
		Top1Agreement float64 `json:"top1_agreement"`
		GreedyAgree   int     `json:"greedy_agree"`
		GreedyForced  int     `json:"greedy_teacher_forced"`
		GreedyTotal   int     `json:"greedy_total"`
	}
	var kc struct {
		Tokens     int
		Types      map[string]quality
		NoiseFloor struct {
			Batch int
			F16   quality
		} `json:"noise_floor"`
	}
	if err := json.Unmarshal([]byte(out), &kc); err != nil || kc.Tokens != 577 || kc.Types["q4"].GreedyTotal != 8 || kc.NoiseFloor.Batch != 1 {
		t.Fatalf("kvcheck --json = %s (err %v)", out, err)
	}
	// More precision moves the logits less: f16 reordered, then q8, then q4.
	floor, q8, q4 := kc.NoiseFloor.F16, kc.Types["q8"], kc.Types["q4"]
	if !(floor.Cosine > q8.Cosine && q8.Cosine > q4.Cosine && q4.Cosine > 0.98) || q8.Top1Agreement < q4.Top1Agreement {
		t.Fatalf("kvcheck figures out of order: floor %+v, q8 %+v, q4 %+v", floor, q8, q4)
	}
	for _, q := range []quality{floor, q8, q4} {
		if q.GreedyForced < q.GreedyAgree {
			t.Fatalf("teacher-forced agreement %d below the free-running prefix %d", q.GreedyForced, q.GreedyAgree)
		}
	}
}

// With a simulated 1 GiB budget an 8B-shaped model is refused with advice
// (engine.TestSessionRefusesWhatDoesNotFit checks nothing was allocated).
func TestRunRefusesModelThatDoesNotFit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llama-8b-shape.gguf")
	testmodel.WriteSparse(t, path, 32, 4096, 32, 8, 14336, 32000, ggml.Q4_0, true, nil)
	_, stderr, code := runCLI(t, "run", "-m", path, "-p", "hi", "--ram", "1GiB")
	if code != 1 || !strings.Contains(stderr, "does not fit") || !strings.Contains(stderr, "  - ") {
		t.Fatalf("exit %d, stderr %q: want a refusal with advice", code, stderr)
	}
	t.Logf("stderr:\n%s", stderr)
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "-m", "x.gguf", "--kv", "q3", "-p", "hi"}, {"logits", "-m", "x.gguf"}, {"nonsense"}} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if _, stderr, code := runCLI(t, "run", "-m", "/nonexistent.gguf", "-p", "hi"); code != 1 || !strings.Contains(stderr, "nonexistent") {
		t.Errorf("missing model: exit %d, %q", code, stderr)
	}
}

// A prompt longer than --ctx is an error naming the fix, unless --keep asks
// for the first tokens plus the most recent window.
func TestRunContextOverflow(t *testing.T) {
	td := testdata.Dir(t)
	args := []string{"run", "-m", filepath.Join(td, "models", "tiny-llama-spm-q4_0.gguf"),
		"--prompt-file", filepath.Join(td, "long_prompt.txt"), "--ctx", "256", "-n", "8", "--temp", "0", "--json"}
	_, stderr, code := runCLI(t, args...)
	if code != 1 || !strings.Contains(stderr, "context budget") || !strings.Contains(stderr, "--keep N") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	out, stderr, code := runCLI(t, append(args, "--keep", "16")...)
	var rr runResult
	if code != 0 || json.Unmarshal([]byte(out), &rr) != nil || rr.GenTokens != 8 || rr.PromptTokens != 738 {
		t.Fatalf("--keep: exit %d, %s %s", code, out, stderr)
	}
}

// Interactive chat keeps the conversation's cache (later turns reuse it)
// and drops the oldest turns once the conversation outgrows --ctx.
func TestChatReusesCacheAndDropsOldTurns(t *testing.T) {
	td := testdata.Dir(t)
	var out, errb bytes.Buffer
	lines := strings.Repeat("Tell me about four-bit caches and long contexts, please.\n", 6)
	env := &Env{Stdin: strings.NewReader(lines), Stdout: &out, Stderr: &errb}
	code := Run(env, []string{"run", "-m", filepath.Join(td, "models", "tiny-qwen2-q4_0.gguf"), "--chat",
		"--system", "Be brief.", "--ctx", "160", "-n", "12", "--temp", "0"})
	stderr := errb.String()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "[reused "); n != 6 {
		t.Fatalf("%d turns answered, want 6:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "[reused 0,") || strings.Count(stderr, "[reused 0,") == 6 {
		t.Fatalf("no turn reused the cache:\n%s", stderr)
	}
	if !strings.Contains(stderr, "dropped the oldest turn") {
		t.Fatalf("conversation never trimmed in a 160-token context:\n%s", stderr)
	}
}
