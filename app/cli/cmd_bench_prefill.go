package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/quant"
)

func init() {
	Register(&Command{
		Name:  "bench prefill",
		Usage: "-m MODEL [--pp 512] [--reps 5] [--threads N] [--kv f16|q8|q4] [--llama-bench PATH] [--json]",
		Run:   benchPrefillCmd,
	})
}

// benchPrefillReport is what `bench prefill --json` prints. The llama_*
// fields and the ratio are set only with --llama-bench.
type benchPrefillReport struct {
	Model         string    `json:"model"`
	Backend       string    `json:"backend"`
	Threads       int       `json:"threads"`
	PP            int       `json:"pp"`
	Batch         int       `json:"batch"`
	KV            string    `json:"kv"`
	Kernels       string    `json:"kernels"`
	NibbleTokS    float64   `json:"nibble_tok_s"`
	NibbleSamples []float64 `json:"nibble_samples_tok_s"`
	LlamaTokS     float64   `json:"llama_tok_s,omitempty"`
	LlamaSamples  []float64 `json:"llama_samples_tok_s,omitempty"`
	LlamaBuild    string    `json:"llama_build,omitempty"`
	Ratio         float64   `json:"ratio,omitempty"`
}

// llamaBenchResult is the part of one llama-bench `-o json` record read here.
type llamaBenchResult struct {
	BuildCommit string    `json:"build_commit"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NThreads    int       `json:"n_threads"`
	AvgTs       float64   `json:"avg_ts"`
	SamplesTs   []float64 `json:"samples_ts"`
}

// parseLlamaBench reads llama-bench's `-o json` output (an array of
// records) and returns the prompt-processing samples (tokens/s) of the
// record with n_prompt = pp and n_gen = 0.
func parseLlamaBench(out []byte, pp int) ([]float64, string, error) {
	return parseLlamaBenchRecord(out, pp, 0)
}

// parseLlamaBenchRecord returns the samples (tokens/s) of the record with
// n_prompt = pp and n_gen = tg: a pp test when tg is 0, a tg test when pp
// is 0.
func parseLlamaBenchRecord(out []byte, pp, tg int) ([]float64, string, error) {
	name := fmt.Sprintf("pp%d", pp)
	if tg > 0 {
		name = fmt.Sprintf("tg%d", tg)
	}
	var recs []llamaBenchResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &recs); err != nil {
		return nil, "", fmt.Errorf("llama-bench output is not its JSON: %w", err)
	}
	for _, r := range recs {
		if r.NPrompt != pp || r.NGen != tg {
			continue
		}
		samples := r.SamplesTs
		if len(samples) == 0 && r.AvgTs > 0 { // older builds print only the mean
			samples = []float64{r.AvgTs}
		}
		if len(samples) == 0 {
			return nil, "", fmt.Errorf("llama-bench record for %s has no samples", name)
		}
		return samples, r.BuildCommit, nil
	}
	return nil, "", fmt.Errorf("llama-bench output has no %s record (n_prompt %d, n_gen %d)", name, pp, tg)
}

// runLlamaBench runs llama-bench once on model: one timed pp run after its
// own warm-up run, on threads threads.
func runLlamaBench(ctx context.Context, path, model string, pp, threads int) ([]float64, string, error) {
	out, err := execLlamaBench(ctx, path, "-m", model, "-p", strconv.Itoa(pp), "-n", "0",
		"-t", strconv.Itoa(threads), "-r", "1", "-o", "json")
	if err != nil {
		return nil, "", err
	}
	return parseLlamaBench(out, pp)
}

// runLlamaBenchDecode runs llama-bench once on model: one timed tg run of
// tg tokens after depth cached ones (its -d; none at 0), on threads threads.
func runLlamaBenchDecode(ctx context.Context, path, model string, tg, depth, threads int) ([]float64, string, error) {
	args := []string{"-m", model, "-p", "0", "-n", strconv.Itoa(tg), "-t", strconv.Itoa(threads), "-r", "1", "-o", "json"}
	if depth > 0 {
		args = append(args, "-d", strconv.Itoa(depth))
	}
	out, err := execLlamaBench(ctx, path, args...)
	if err != nil {
		return nil, "", err
	}
	return parseLlamaBenchRecord(out, 0, tg)
}

// execLlamaBench runs llama-bench with args and returns its standard output.
func execLlamaBench(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := stderr.String()
		if len(msg) > 400 {
			msg = msg[len(msg)-400:]
		}
		return nil, fmt.Errorf("run %s: %w: %s", path, err, msg)
	}
	return out, nil
}

// benchPrefillCmd times the processing of a pp-token prompt as llama-bench
// does (random tokens, an empty cache, batches of --batch, one untimed
// warm-up run first) and reports the median of --reps runs. With
// --llama-bench it runs that binary on the same file between our
// repetitions, so both share the machine's state, and prints the ratio.
func benchPrefillCmd(env *Env, args []string) error {
	fs := NewFlags(env, "bench prefill")
	var mf modelFlags
	mf.register(fs)
	// llama-bench's cache is f16 unless told otherwise; so is ours here.
	mf.kvType = "f16"
	fs.Lookup("kv").DefValue = "f16"
	pp := fs.Int("pp", 512, "prompt tokens")
	reps := fs.Int("reps", 5, "timed runs (median reported)")
	llamaBench := fs.String("llama-bench", "", "also run this llama-bench `PATH` on the model and print the ratio")
	asJSON := fs.Bool("json", false, "print JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of our runs to `FILE`")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	if mf.path == "" {
		return fmt.Errorf("%w: need -m MODEL", ErrUsage)
	}
	if err := checkIntFlags(intBound{"--pp", *pp, 1}, intBound{"--reps", *reps, 1}); err != nil {
		return err
	}
	if mf.ctx == 0 {
		mf.ctx = *pp
	}
	o, err := mf.options()
	if err != nil {
		return err
	}
	if *pp > o.Ctx {
		return fmt.Errorf("%w: --pp %d exceeds --ctx %d", ErrUsage, *pp, o.Ctx)
	}
	b, choice, err := mf.newBackend()
	if err != nil {
		return err
	}
	defer b.Close()
	threads := 0 // the CPU's worker count; 0 on the GPU
	if c, ok := b.(*cpu.Backend); ok {
		threads = c.Threads()
	}
	if *llamaBench != "" && threads == 0 {
		return fmt.Errorf("%w: --llama-bench compares CPU prefill; use --backend cpu", ErrUsage)
	}
	m, err := engine.LoadModel(mf.path, b)
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := engine.NewSession(m, b, o)
	if err != nil {
		return err
	}
	defer s.Close()
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "backend %s\n", choice)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]int32, *pp)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(m.HP.Vocab))
	}
	ctx := context.Background()
	prefill := func() (float64, error) {
		s.Reset()
		t0 := time.Now()
		if _, err := s.Prefill(ctx, prompt); err != nil {
			return 0, fmt.Errorf("prefill: %w", err)
		}
		return float64(*pp) / time.Since(t0).Seconds(), nil
	}
	if _, err := prefill(); err != nil { // warm-up: faults the mapped weights in
		return err
	}
	rep := benchPrefillReport{Model: filepath.Base(mf.path), Backend: choice.Backend, Threads: threads, PP: *pp,
		Batch: o.Batch, KV: o.KV.String(), Kernels: quant.Kernels()}
	stopProfile, err := startProfile(*cpuProfile) // samples our process only, not llama-bench
	if err != nil {
		return err
	}
	defer stopProfile()
	for i := 0; i < *reps; i++ {
		rate, err := prefill()
		if err != nil {
			return err
		}
		rep.NibbleSamples = append(rep.NibbleSamples, rate)
		if *llamaBench != "" {
			samples, build, err := runLlamaBench(ctx, *llamaBench, mf.path, *pp, threads)
			if err != nil {
				return err
			}
			rep.LlamaSamples = append(rep.LlamaSamples, samples...)
			rep.LlamaBuild = build
		}
	}
	rep.NibbleTokS = median(rep.NibbleSamples)
	if len(rep.LlamaSamples) > 0 {
		rep.LlamaTokS = median(rep.LlamaSamples)
		rep.Ratio = rep.NibbleTokS / rep.LlamaTokS
	}
	if *asJSON {
		return writeJSON(env.Stdout, rep)
	}
	fmt.Fprintf(env.Stdout, "pp%d  threads %d  kv %s  kernels %s\n", rep.PP, rep.Threads, rep.KV, rep.Kernels)
	fmt.Fprintf(env.Stdout, "nibble       %8.1f tok/s  (median of %d)\n", rep.NibbleTokS, len(rep.NibbleSamples))
	if rep.LlamaTokS > 0 {
		fmt.Fprintf(env.Stdout, "llama-bench  %8.1f tok/s  (median of %d, build %s)\n", rep.LlamaTokS, len(rep.LlamaSamples), rep.LlamaBuild)
		fmt.Fprintf(env.Stdout, "ratio        %8.2f×\n", rep.Ratio)
	}
	return nil
}
