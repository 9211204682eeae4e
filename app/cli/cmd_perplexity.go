package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"nibble/engine"
	"nibble/engine/eval"
	"nibble/engine/kv"
)

func init() {
	Register(&Command{
		Name:  "perplexity",
		Usage: "-m MODEL --text FILE --ctx N [--kv f16,q8,q4,q4-plain] [--evict h2o:25%,window:25%] [--batch 512] [--chunks N] [--json]",
		Run:   perplexityCmd,
	})
}

const perplexityHelp = `nibble perplexity: perplexity over a text, per KV cache mode, chunked as
llama.cpp's llama-perplexity chunks it so that the figures compare: the text
is tokenized once (BOS first) and cut into ⌊tokens/N⌋ non-overlapping chunks
of N = --ctx tokens; each chunk runs from an empty cache with its first token
replaced by BOS, and only the second half is scored: the logits at positions
N/2 … N−2, each against the next token (N/2−1 tokens per chunk, rounding N/2
down). ± is llama-perplexity's standard error. f16 always runs first, as the
reference for "top-1 vs f16": the share of scored positions whose most likely
token is f16's; "top-1 correct" is the share where it is the text's next token.

The prompt is prefilled in batches of --batch (512 by default; llama.cpp's
reference figures used -b 1024): within a batch, attention reads the batch's
own rows in float and the earlier batches from the cache.

--evict runs each KV mode again with its cache bounded to a budget (docs/
ARCHITECTURE.md, "Eviction (H2O)"); f16 without eviction stays the
reference. An evicting cache prefills in batches of at most an eighth of
its budget, so that a row sees little more than the budget.

Flags:
`

func perplexityCmd(env *Env, args []string) error {
	fs := NewFlags(env, "perplexity")
	var mf modelFlags
	mf.registerModel(fs)
	textPath := fs.String("text", "", "text `FILE` to score")
	kvList := fs.String("kv", "f16,q8,q4,q4-plain", kvModesUsage)
	chunks := fs.Int("chunks", 0, "score only the first `N` chunks (0: all)")
	evict := fs.String("evict", "", evictListUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { io.WriteString(fs.Output(), perplexityHelp); fs.PrintDefaults() }
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if *textPath == "" {
		return fmt.Errorf("%w: --text FILE is required", ErrUsage)
	}
	if mf.ctx == 0 {
		return fmt.Errorf("%w: --ctx N (the chunk length) is required", ErrUsage)
	}
	if err := checkIntFlags(intBound{"--ctx", mf.ctx, 4}, intBound{"--chunks", *chunks, 0}); err != nil {
		return err
	}
	modes, err := eval.ParseKVModes(*kvList)
	if err != nil {
		return fmt.Errorf("%w: --kv: %v", ErrUsage, err)
	}
	modes = withF16First(modes)
	evictions, err := parseEvictions(*evict)
	if err != nil {
		return err
	}
	if _, err := mf.options(); err != nil {
		return err
	}
	text, err := os.ReadFile(*textPath)
	if err != nil {
		return fmt.Errorf("read text: %w", err)
	}
	m, base, closeModel, err := mf.load(env)
	if err != nil {
		return err
	}
	defer closeModel()
	warnAboveTrained(env, base.Ctx, m.HP.CtxTrain)
	tokens := m.Tok.Encode(string(text), true, false)
	plan, err := eval.PlanChunks(len(tokens), base.Ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", *textPath, err)
	}
	if *chunks > 0 {
		plan.Chunks = min(plan.Chunks, *chunks)
	}

	ctx, stop := env.interruptContext()
	defer stop()
	progress := benchProgress(env)
	var results []eval.PerplexityResult
	var ref []int32
	for _, mode := range modes {
		for _, ev := range withNoEviction(evictions) {
			name, o := evictedName(mode.Name, ev), mode.Apply(base)
			if ev != nil {
				o = ev.Apply(o, base.Ctx)
			}
			s, err := engine.NewSession(m, m.Backend, o)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res, argmax, err := eval.RunPerplexity(ctx, s, name, tokens, plan, ref,
				func(done int) { progress(fmt.Sprintf("perplexity %s: chunk %d/%d", name, done, plan.Chunks)) })
			s.Close()
			progress("")
			if err != nil {
				return err
			}
			if mode.Type == kv.F16 && ev == nil {
				ref = argmax
			}
			results = append(results, res)
		}
	}
	batch := min(base.Batch, base.Ctx)
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"model": filepath.Base(mf.path), "text": filepath.Base(*textPath),
			"chunking": plan, "batch": batch, "kv_group": base.KVGroup, "smooth": !base.KVNoSmooth, "modes": results})
	}
	fmt.Fprintf(env.Stdout, "%s on %s: %d tokens, %d chunks of %d, %d scored per chunk (%d in all), batch %d, KV group %d\n",
		filepath.Base(mf.path), filepath.Base(*textPath), plan.Tokens, plan.Chunks, plan.Ctx, plan.ScoredPerChunk, plan.Scored(), batch, base.KVGroup)
	fmt.Fprintf(env.Stdout, "%-18s %22s %9s %14s %14s %9s\n", "kv", "perplexity", "vs f16", "top-1 vs f16", "top-1 correct", "seconds")
	f16 := results[0].Perplexity
	for _, r := range results {
		agree := "-"
		if r.Top1Agreement != nil {
			agree = fmt.Sprintf("%.2f%%", 100**r.Top1Agreement)
		}
		fmt.Fprintf(env.Stdout, "%-18s %22s %+8.2f%% %14s %13.2f%% %9.1f\n", r.Mode, fmt.Sprintf("%.4f ± %.4f", r.Perplexity, r.StdErr),
			100*(r.Perplexity/f16-1), agree, 100*r.Top1Correct, r.Seconds)
	}
	return nil
}

// withF16First puts f16 at the head of modes, adding it when absent: it is
// the reference the other modes' top-1 agreement is measured against.
func withF16First(modes []eval.KVMode) []eval.KVMode {
	out := []eval.KVMode{{Name: kv.F16.String(), Type: kv.F16}}
	for _, m := range modes {
		if m.Type != kv.F16 {
			out = append(out, m)
		}
	}
	return out
}
