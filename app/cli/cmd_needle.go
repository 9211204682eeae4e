package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"nibble/engine"
	"nibble/engine/eval"
)

func init() {
	Register(&Command{
		Name:  "needle",
		Usage: "-m MODEL --cases FILE.jsonl [--kv f16,q8,q4,q4-plain] [--evict h2o:BUDGET|window:BUDGET] [--limit N] [--json]",
		Run:   needleCmd,
	})
}

const needleHelp = `nibble needle: exact-answer retrieval over long documents, per KV cache mode.

Each case (one JSON object per line: prompt ending in "Answer:", answer,
ctx, depth) runs once per mode from an empty cache: the prompt is prefilled
as nibble run does, then the answer is decoded greedily up to its first
newline (at most 16 tokens). A case is correct when that continuation,
trimmed, starts with the answer. Results are counted per (context, depth)
cell, per context and overall. --evict runs each mode again with its cache
bounded to a budget (a percentage is of each case's prompt), prefilled in
batches of at most an eighth of the budget.

Rank and margin score the expected answer " ANSWER" under teacher forcing:
after the prompt and the answer's first i tokens, the logits for answer
token i give its rank (1 + the number of tokens with a larger logit; 1 means
greedy picks it) and its margin (its logit minus the largest logit of any
other token; negative: a wrong token wins by that much). A case's rank is
the worst over the answer's tokens and its margin the smallest; a cell
shows the smallest margin of its cases.

Flags:
`

func needleCmd(env *Env, args []string) error {
	fs := NewFlags(env, "needle")
	var mf modelFlags
	mf.registerModel(fs)
	casesPath := fs.String("cases", "", "needle cases `FILE.jsonl`")
	kvList := fs.String("kv", "f16,q8,q4,q4-plain", kvModesUsage)
	evict := fs.String("evict", "", evictListUsage)
	limit := fs.Int("limit", 0, "run only the first `N` cases (0: all)")
	asJSON := fs.Bool("json", false, "print JSON: per mode, the summary and every case")
	fs.Usage = func() { io.WriteString(fs.Output(), needleHelp); fs.PrintDefaults() }
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if *casesPath == "" {
		return fmt.Errorf("%w: --cases FILE.jsonl is required", ErrUsage)
	}
	if err := intFlagAtLeast("--limit", *limit, 0); err != nil {
		return err
	}
	modes, err := eval.ParseKVModes(*kvList)
	if err != nil {
		return fmt.Errorf("%w: --kv: %v", ErrUsage, err)
	}
	evictions, err := parseEvictions(*evict)
	if err != nil {
		return err
	}
	if _, err := mf.options(); err != nil {
		return err
	}
	cases, err := eval.ReadNeedleCases(*casesPath)
	if err != nil {
		return err
	}
	if *limit > 0 && *limit < len(cases) {
		cases = cases[:*limit]
	}
	m, base, closeModel, err := mf.load(env)
	if err != nil {
		return err
	}
	defer closeModel()
	toks := make([]eval.NeedleTokens, len(cases))
	longest := 0
	for i, c := range cases {
		if toks[i], err = eval.TokenizeNeedle(m.Tok, c); err != nil {
			return fmt.Errorf("%s: %w", *casesPath, err)
		}
		longest = max(longest, len(toks[i].Prompt)+max(len(toks[i].Answer), eval.MaxAnswerTokens))
	}
	if base.Ctx == 0 {
		base.Ctx = longest
	} else if longest > base.Ctx {
		return fmt.Errorf("%w: the longest case needs %d tokens (prompt and answer); --ctx is %d", ErrUsage, longest, base.Ctx)
	}
	warnAboveTrained(env, base.Ctx, m.HP.CtxTrain)

	ctx, stop := env.interruptContext()
	defer stop()
	progress := benchProgress(env)
	runs := make([]needleModeRun, 0, len(modes)*(1+len(evictions)))
	for _, mode := range modes {
		for _, ev := range withNoEviction(evictions) {
			run, err := runNeedleMode(ctx, m, mode, ev, base, cases, toks, progress)
			progress("")
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"model": filepath.Base(mf.path), "cases": len(cases), "ctx": base.Ctx,
			"batch": min(base.Batch, base.Ctx), "kv_group": base.KVGroup, "smooth": !base.KVNoSmooth, "modes": runs})
	}
	fmt.Fprintf(env.Stdout, "%s, %s: %d cases, greedy up to %d tokens, prefill batch %d, KV group %d\n",
		filepath.Base(mf.path), filepath.Base(*casesPath), len(cases), eval.MaxAnswerTokens, min(base.Batch, base.Ctx), base.KVGroup)
	printNeedleTable(env.Stdout, runs)
	return nil
}

// runNeedleMode runs every case under one KV mode and eviction (nil:
// none). A percentage budget is taken of each case's prompt, so such a
// mode starts a session per case.
func runNeedleMode(ctx context.Context, m *engine.Model, mode eval.KVMode, ev *eval.Eviction, base engine.Options,
	cases []eval.NeedleCase, toks []eval.NeedleTokens, progress func(string)) (needleModeRun, error) {
	name := evictedName(mode.Name, ev)
	run := needleModeRun{Mode: name}
	var s *engine.Session
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	start := time.Now()
	for i, c := range cases {
		if s == nil || ev != nil && ev.Percent {
			if s != nil {
				s.Close()
			}
			o := mode.Apply(base)
			if ev != nil {
				o = ev.Apply(o, len(toks[i].Prompt))
			}
			var err error
			if s, err = engine.NewSession(m, m.Backend, o); err != nil {
				return run, fmt.Errorf("%s: %w", name, err)
			}
			run.Rotated = s.Opts.KVRotated
		}
		progress(fmt.Sprintf("needle %s: case %d/%d", name, i+1, len(cases)))
		r, err := eval.RunNeedle(ctx, s, c, toks[i])
		if err != nil {
			return run, fmt.Errorf("%s: %w", name, err)
		}
		run.Results = append(run.Results, r)
	}
	run.Seconds = time.Since(start).Seconds()
	run.Summary = eval.SummarizeNeedle(run.Results)
	return run, nil
}

// needleModeRun is one KV mode's results.
type needleModeRun struct {
	Mode    string              `json:"kv"`
	Rotated bool                `json:"rotated"` // the mode resolved: whether K was stored rotated
	Seconds float64             `json:"seconds"` // wall time of the mode's cases
	Summary eval.NeedleSummary  `json:"summary"`
	Results []eval.NeedleResult `json:"results"`
}

// printNeedleTable prints one row per cell, context and the total, one
// column per mode: correct/total and the smallest margin; then the misses.
func printNeedleTable(w io.Writer, runs []needleModeRun) {
	fmt.Fprintln(w, "exact answers (and the smallest answer margin, in logits) by context and needle depth:")
	fmt.Fprintf(w, "%-10s", "cell")
	for _, r := range runs {
		fmt.Fprintf(w, " %16s", r.Mode)
	}
	fmt.Fprintln(w)
	row := func(label string, pick func(eval.NeedleSummary) eval.NeedleCell) {
		fmt.Fprintf(w, "%-10s", label)
		for _, r := range runs {
			c := pick(r.Summary)
			fmt.Fprintf(w, " %16s", fmt.Sprintf("%d/%d %+7.2f", c.Correct, c.Total, c.MinMargin))
		}
		fmt.Fprintln(w)
	}
	first := runs[0].Summary
	for i, c := range first.Cells {
		row(fmt.Sprintf("%s %.2g", ctxLabel(c.Ctx), c.Depth), func(s eval.NeedleSummary) eval.NeedleCell { return s.Cells[i] })
	}
	for i, c := range first.ByCtx {
		row(ctxLabel(c.Ctx), func(s eval.NeedleSummary) eval.NeedleCell { return s.ByCtx[i] })
	}
	row("total", func(s eval.NeedleSummary) eval.NeedleCell { return s.Overall })
	fmt.Fprintf(w, "%-10s", "seconds")
	for _, r := range runs {
		fmt.Fprintf(w, " %16.1f", r.Seconds)
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		var misses []string
		for _, res := range r.Results {
			if !res.Correct {
				misses = append(misses, fmt.Sprintf("line %d (%s %.2g) %s→%q margin %+.2f at token %d",
					res.Line, ctxLabel(res.Ctx), res.Depth, res.Answer, strings.TrimSpace(res.Output), res.Margin, res.MarginToken))
			}
		}
		if len(misses) > 0 {
			fmt.Fprintf(w, "%s misses: %s\n", r.Mode, strings.Join(misses, "; "))
		}
	}
}

// ctxLabel writes a context length as 1K, 2K… when it is a multiple of 1024.
func ctxLabel(n int) string {
	if n > 0 && n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprint(n)
}

// benchProgress shows one status line on a terminal, rewritten in place;
// an empty line clears it. Elsewhere it prints nothing.
func benchProgress(env *Env) func(line string) {
	if !isTerminalWriter(env.Stderr) {
		return func(string) {}
	}
	return func(line string) {
		fmt.Fprintf(env.Stderr, "\r\033[K%s", line)
	}
}
