package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"nibble/app/backends"
	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/kv"
)

func init() {
	Register(&Command{
		Name:  "bench decode",
		Usage: "-m MODEL [--depth 0,1024,4096] [--kv q4[,f16,q8]] [--pp 128] [--tg 64] [--reps 3] [--threads N] [--backend cpu|metal|auto] [--expect] [--llama-bench PATH] [--json]",
		Run:   benchDecodeCmd,
	})
}

type benchDecodeResult struct {
	Depth       int     `json:"depth"`
	KV          string  `json:"kv"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	// ExpectedTokS is the decode rate the app shows before a load
	// (--expect): backends.ExpectDecode at the step's mean cache length.
	ExpectedTokS float64 `json:"expected_tok_s,omitempty"`
	// With --llama-bench: llama-bench's tg rate on the same file after as
	// many cached tokens (its -d), its samples, and ours over its.
	DecodeSamples []float64 `json:"decode_samples_tok_s,omitempty"`
	LlamaTokS     float64   `json:"llama_tok_s,omitempty"`
	LlamaSamples  []float64 `json:"llama_samples_tok_s,omitempty"`
	LlamaBuild    string    `json:"llama_build,omitempty"`
	Ratio         float64   `json:"ratio,omitempty"`
}

// parseInts parses the comma-separated list s given to flag (spelled as in the usage line).
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: %s must be a comma-separated list of non-negative integers, got %q", ErrUsage, flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// benchDecodeCmd measures, at each depth and for each KV type, the prefill
// rate of a pp-token batch placed after depth cached tokens and the decode
// rate of tg tokens after that (random token ids, as llama-bench does). With
// several KV types, their decode repetitions are interleaved so they share
// the machine's state; each figure is the median of --reps. With
// --llama-bench (one KV type, f16 unless told, llama-bench's default) that
// binary's tg test runs on the same file after each of our repetitions, at
// the same cache depth, and the ratio of the medians is printed.
func benchDecodeCmd(env *Env, args []string) error {
	fs := NewFlags(env, "bench decode")
	var mf modelFlags
	mf.register(fs)
	depthList := fs.String("depth", "0", "comma-separated cache depths")
	pp := fs.Int("pp", 128, "prompt tokens timed for prefill")
	tg := fs.Int("tg", 64, "tokens timed for decode")
	reps := fs.Int("reps", 3, "decode repetitions per depth and KV type (median reported)")
	asJSON := fs.Bool("json", false, "print JSON")
	expect := fs.Bool("expect", false, "print the expected decode rate (the app's figure before a load) beside the measured one")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole benchmark to `FILE`")
	llamaBench := fs.String("llama-bench", "", "also run this llama-bench `PATH`'s tg test on the model and print the ratio (CPU, one KV type)")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	if *llamaBench != "" && !flagWasSet(fs, "kv") {
		mf.kvType = "f16" // llama-bench's cache
	}
	depths, err := parseInts("--depth", *depthList)
	if err != nil {
		return err
	}
	if mf.path == "" {
		return fmt.Errorf("%w: need -m MODEL", ErrUsage)
	}
	// --tg 2 is the least that times anything: the first decode step is an untimed warm-up.
	if err := checkIntFlags(intBound{"--pp", *pp, 1}, intBound{"--tg", *tg, 2}, intBound{"--reps", *reps, 1}); err != nil {
		return err
	}
	var kvTypes []kv.Type
	for _, name := range strings.Split(mf.kvType, ",") {
		t, err := kv.ParseType(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		kvTypes = append(kvTypes, t)
	}
	if mf.ctx == 0 {
		mf.ctx = slices.Max(depths) + *pp + *tg
	}
	mf.kvType = kvTypes[0].String()
	o, err := mf.options()
	if err != nil {
		return err
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
	if *llamaBench != "" && (threads == 0 || len(kvTypes) > 1) {
		return fmt.Errorf("%w: --llama-bench compares CPU decode with one KV type; use --backend cpu and one --kv", ErrUsage)
	}
	if !*asJSON {
		fmt.Fprintf(env.Stderr, "backend %s\n", choice)
	}
	var desc estimate.Desc
	if *expect {
		if desc, err = estimate.FromFile(mf.path); err != nil {
			return err
		}
		// The CPU probe runs now, before the model is mapped, as the app
		// runs it before a load.
		if _, err := backends.ExpectDecode(desc, 1, kvTypes[0], choice, threads); err != nil {
			return fmt.Errorf("--expect: %w", err)
		}
	}
	m, err := engine.LoadModel(mf.path, b)
	if err != nil {
		return err
	}
	defer m.Close()
	sessions := make([]*engine.Session, len(kvTypes))
	for i, t := range kvTypes {
		o.KV = t
		if sessions[i], err = engine.NewSession(m, b, o); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randTokens := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(m.HP.Vocab))
		}
		return t
	}
	stopProfile, err := startProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx := context.Background()
	// Warm-up: the first forward pass faults the mapped weights in.
	for _, s := range sessions {
		if _, err := s.Prefill(ctx, randTokens(min(8, *pp))); err != nil {
			return err
		}
		s.Reset()
	}
	var results []benchDecodeResult
	for _, depth := range depths {
		if depth+*pp+*tg > o.Ctx {
			return fmt.Errorf("depth %d + pp %d + tg %d exceeds --ctx %d", depth, *pp, *tg, o.Ctx)
		}
		prefix, batch, toks := randTokens(depth), randTokens(*pp), randTokens(*tg)
		prompt := slices.Concat(prefix, batch)
		prefillRates := make([]float64, len(sessions))
		for i, s := range sessions {
			s.Reset()
			if depth > 0 {
				if _, err := s.Prefill(ctx, prefix); err != nil {
					return err
				}
			}
			t0 := time.Now()
			if _, err := s.Prefill(ctx, prompt); err != nil {
				return err
			}
			prefillRates[i] = float64(*pp) / time.Since(t0).Seconds()
		}
		decodeRates := make([][]float64, len(sessions))
		var llamaRates []float64
		var llamaBuild string
		for rep := 0; rep < *reps; rep++ {
			for i, s := range sessions {
				s.Truncate(len(prompt))
				// A cache that cannot rewind (a wrapped sliding-window
				// ring, eviction) keeps less: read the prompt again, untimed.
				if len(s.Tokens()) < len(prompt) {
					if _, err := s.Prefill(ctx, prompt); err != nil {
						return err
					}
				}
				if err := s.Step(toks[0]); err != nil { // warm-up step, untimed
					return err
				}
				t1 := time.Now()
				for _, t := range toks[1:] {
					if err := s.Step(t); err != nil {
						return err
					}
				}
				decodeRates[i] = append(decodeRates[i], float64(*tg-1)/time.Since(t1).Seconds())
			}
			if *llamaBench != "" {
				samples, build, err := runLlamaBenchDecode(ctx, *llamaBench, mf.path, *tg, len(prompt), threads)
				if err != nil {
					return err
				}
				llamaRates, llamaBuild = append(llamaRates, samples...), build
			}
		}
		for i, t := range kvTypes {
			r := benchDecodeResult{Depth: depth, KV: t.String(), PrefillTokS: prefillRates[i], DecodeTokS: median(decodeRates[i])}
			if len(llamaRates) > 0 {
				r.DecodeSamples, r.LlamaSamples, r.LlamaBuild = decodeRates[i], llamaRates, llamaBuild
				r.LlamaTokS = median(llamaRates)
				r.Ratio = r.DecodeTokS / r.LlamaTokS
			}
			var how string
			if *expect {
				e, err := backends.ExpectDecode(desc, len(prompt)+*tg/2, t, choice, threads)
				if err != nil {
					return fmt.Errorf("--expect: %w", err)
				}
				r.ExpectedTokS, how = e.TokPerSec, e.How
			}
			results = append(results, r)
			if !*asJSON {
				fmt.Fprintf(env.Stdout, "depth %6d  kv %-3s  prefill %8.1f tok/s  decode %7.2f tok/s", r.Depth, r.KV, r.PrefillTokS, r.DecodeTokS)
				if *expect {
					fmt.Fprintf(env.Stdout, "  expected %7.2f tok/s (%.2f×; %s)", r.ExpectedTokS, r.ExpectedTokS/r.DecodeTokS, how)
				}
				if r.LlamaTokS > 0 {
					fmt.Fprintf(env.Stdout, "  llama-bench %7.2f tok/s (build %s)  ratio %.2f×", r.LlamaTokS, r.LlamaBuild, r.Ratio)
				}
				fmt.Fprintln(env.Stdout)
			}
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"model": filepath.Base(mf.path), "backend": choice.Backend, "backend_reason": choice.Reason, "threads": threads, "results": results})
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// startProfile starts a CPU profile into path (no-op for ""); the returned
// func stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
