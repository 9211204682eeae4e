package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"nibble/engine"
	"nibble/engine/cpu"
)

func init() {
	Register(&Command{
		Name:  "bench decode",
		Usage: "-m MODEL [--depth 0,1024,4096] [--pp 128] [--tg 64] [--threads N] [--kv f16|q8|q4] [--json]",
		Run:   benchDecodeCmd,
	})
}

type benchDecodeResult struct {
	Depth       int     `json:"depth"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: %q is not a list of non-negative integers", ErrUsage, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// benchDecodeCmd measures, at each depth, the prefill rate of a pp-token
// batch placed after depth cached tokens and the decode rate of tg tokens
// after that (random token ids, as llama-bench does).
func benchDecodeCmd(env *Env, args []string) error {
	fs := NewFlags(env, "bench decode")
	var mf modelFlags
	mf.register(fs)
	depthList := fs.String("depth", "0", "comma-separated cache depths")
	pp := fs.Int("pp", 128, "prompt tokens timed for prefill")
	tg := fs.Int("tg", 64, "tokens timed for decode")
	asJSON := fs.Bool("json", false, "print JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed decode steps to `FILE`")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	depths, err := parseInts(*depthList)
	if err != nil {
		return err
	}
	if mf.path == "" || *pp < 1 || *tg < 2 {
		return fmt.Errorf("%w: need -m MODEL, --pp >= 1 and --tg >= 2", ErrUsage)
	}
	maxDepth := 0
	for _, d := range depths {
		maxDepth = max(maxDepth, d)
	}
	if mf.ctx == 0 {
		mf.ctx = maxDepth + *pp + *tg
	}
	o, err := mf.options()
	if err != nil {
		return err
	}
	m, err := engine.LoadModel(mf.path)
	if err != nil {
		return err
	}
	defer m.Close()
	b := cpu.New(mf.threads)
	defer b.Close()
	s, err := engine.NewSession(m, b, o)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randTokens := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(m.HP.Vocab))
		}
		return t
	}
	var results []benchDecodeResult
	for _, depth := range depths {
		if depth+*pp+*tg > s.Opts.Ctx {
			return fmt.Errorf("depth %d + pp %d + tg %d exceeds --ctx %d", depth, *pp, *tg, s.Opts.Ctx)
		}
		s.Reset()
		ctx := context.Background()
		if depth > 0 {
			if _, err := s.Prefill(ctx, randTokens(depth)); err != nil {
				return err
			}
		}
		prompt := append(append([]int32{}, s.Tokens()...), randTokens(*pp)...)
		t0 := time.Now()
		if _, err := s.Prefill(ctx, prompt); err != nil {
			return err
		}
		prefill := time.Since(t0)
		toks := randTokens(*tg)
		if err := s.Step(toks[0]); err != nil { // warm-up step, untimed
			return err
		}
		stopProfile, err := startProfile(*cpuProfile)
		if err != nil {
			return err
		}
		t1 := time.Now()
		for _, t := range toks[1:] {
			if err := s.Step(t); err != nil {
				stopProfile()
				return err
			}
		}
		decode := time.Since(t1)
		stopProfile()
		r := benchDecodeResult{Depth: depth, PrefillTokS: float64(*pp) / prefill.Seconds(), DecodeTokS: float64(*tg-1) / decode.Seconds()}
		results = append(results, r)
		if !*asJSON {
			fmt.Fprintf(env.Stdout, "depth %6d  prefill %8.1f tok/s  decode %7.2f tok/s\n", r.Depth, r.PrefillTokS, r.DecodeTokS)
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"model": filepath.Base(mf.path), "threads": b.Threads(),
			"kv": o.KV.String(), "results": results})
	}
	return nil
}

// startProfile starts a CPU profile into path (no-op for ""); the returned
// func stops it. Each depth overwrites the file, so the last depth is kept.
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
