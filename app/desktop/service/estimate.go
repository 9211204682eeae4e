package service

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/scheduler"
)

// Estimate is the memory a context and KV cache type would take with the
// loaded model, for the context slider.
type Estimate struct {
	Ctx     int    `json:"ctx"`
	KV      string `json:"kv"`
	Weights int64  `json:"weights"` // resident: every tensor, every expert of a mixture
	// Active are the weight bytes a token reads, when markedly fewer than
	// Weights (a mixture of experts, embedding tables only looked up);
	// 0 otherwise. Experts and ExpertsUsed: a mixture's counts (0: dense).
	Active      int64 `json:"active"`
	Experts     int   `json:"experts"`
	ExpertsUsed int   `json:"expertsUsed"`
	// ActiveApprox: Active is the model card's active share of a listed
	// file, not counted from the header's tensors.
	ActiveApprox bool   `json:"activeApprox"`
	KVBytes      int64  `json:"kvBytes"`
	Scratch      int64  `json:"scratch"`
	Overhead     int64  `json:"overhead"`
	Total        int64  `json:"total"`
	Budget       int64  `json:"budget"`  // this machine's memory budget (0: unknown)
	Verdict      string `json:"verdict"` // fits, tight, will-not-fit or unknown
	MaxCtx       int    `json:"maxCtx"`  // largest context that fits with this KV type (0: none or unknown)
	// CtxTrain is the model's trained context (the slider's end).
	CtxTrain int `json:"ctxTrain"`
	// Limits are the largest context for each KV type (q4, q8, f16).
	Limits []KVLimit `json:"limits"`
	// Advice is the estimator's advice in words: what to change so that it
	// fits, or leaves headroom when tight (empty when it fits comfortably).
	Advice []string `json:"advice"`
	// BudgetSource says where Budget came from.
	BudgetSource string `json:"budgetSource"`
	// Approx: the weights are a listed size, not read from the header.
	Approx bool `json:"approx"`
	// TokPerSec is the decode speed to expect on this machine (catalog
	// files; 0: no figure), SpeedNote how it was reached or why none.
	TokPerSec float64 `json:"tokPerSec"`
	SpeedNote string  `json:"speedNote,omitempty"`
}

// Budget sources, for Estimate.BudgetSource and Diagnostics.
const (
	BudgetAvailable  = "available memory"
	BudgetWired      = "GPU wired limit (iogpu.wired_limit_mb)"
	BudgetSettings   = "memory limit in Settings"
	budgetUnknownPre = "unknown: "
)

// parseKV reads a KV cache type name; "" and "auto" are q4, the compact
// cache Nibble is built around (docs/ARCHITECTURE.md, "KV cache format").
func parseKV(name string) (kv.Type, error) {
	if name == "" || name == "auto" {
		name = "q4"
	}
	t, err := kv.ParseType(name)
	if err != nil {
		return 0, fmt.Errorf("KV cache type %q: want auto, q4, q8 or f16", name)
	}
	return t, nil
}

// evaluate is the estimate of d under o against b, with every KV type's
// limit and the estimator's advice: one estimate.Assess, so the limits,
// the advice and the verdict name the same figures, each capped at the
// model's trained context (the slider's end: memory for 150K tokens says
// nothing useful about a model trained on 8K).
func evaluate(d estimate.Desc, o estimate.Options, b estimate.Budget, source string) (Estimate, error) {
	f, err := estimate.Assess(d, o, b, d.HParams.CtxTrain)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	e := f.Estimate
	out := Estimate{Ctx: e.Ctx, KV: e.KVType.String(), Weights: e.Weights, KVBytes: e.KV, Scratch: e.Scratch,
		Overhead: e.Overhead, Total: e.Total, Budget: e.Budget, Verdict: e.Verdict.String(), MaxCtx: e.MaxCtx,
		CtxTrain: d.HParams.CtxTrain, Limits: []KVLimit{}, Advice: appAdvice(f.Advice), BudgetSource: source, Approx: !d.Exact}
	if e.SparseRead() {
		out.Active = e.Active
		out.ActiveApprox = !d.Exact || strings.HasPrefix(d.Source, "catalog:")
	}
	out.Experts, out.ExpertsUsed = e.Experts.Count, e.Experts.Used
	for _, l := range f.Limits {
		out.Limits = append(out.Limits, KVLimit{KV: l.KV.String(), Bytes: l.KVBytes, MaxCtx: l.MaxCtx})
	}
	return out, nil
}

var (
	ctxFlag = regexp.MustCompile(`--ctx (\d+)`)
	kvFlag  = regexp.MustCompile(`--kv (\w+)`)
	// evictFlag is the estimator's eviction advice, which the app follows
	// through a setting rather than a flag.
	evictFlag = regexp.MustCompile(`: --evict h2o:\d+ holds`)
)

// appAdvice puts the estimator's advice, written for the command line, in
// the app's words: "--ctx 8192" becomes "8,192 tokens" (as the limits row
// writes it), "--kv q8" "q8 KV".
func appAdvice(adv []string) []string {
	out := make([]string, 0, len(adv))
	for _, a := range adv {
		a = ctxFlag.ReplaceAllStringFunc(a, func(f string) string { return thousands(ctxFlag.FindStringSubmatch(f)[1]) + " tokens" })
		a = kvFlag.ReplaceAllString(a, "$1 KV")
		a = evictFlag.ReplaceAllString(a, " (Settings, When the context does not fit): H2O holds")
		a = strings.TrimSpace(a)
		if r, n := utf8.DecodeRuneInString(a); n > 0 {
			a = string(unicode.ToUpper(r)) + a[n:]
		}
		out = append(out, a)
	}
	return out
}

// thousands writes a run of digits with commas between the thousands.
func thousands(digits string) string {
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NotFitError refuses a load or a context change that will not fit: one
// line with what it needs, then the estimator's advice, a line each.
type NotFitError struct {
	Name     string
	Estimate Estimate
}

func (e *NotFitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s will not fit: needs %s.", e.Name, needs(e.Estimate.Total, e.Estimate.Budget))
	for _, a := range e.Estimate.Advice {
		b.WriteString("\n" + a)
	}
	return b.String()
}

// needs is "X of Y GiB" (MiB under a GiB), both in the budget's unit.
func needs(total, budget int64) string {
	if budget >= 1<<30 {
		return fmt.Sprintf("%.2f of %.2f GiB", float64(total)/(1<<30), float64(budget)/(1<<30))
	}
	return fmt.Sprintf("%.1f of %.1f MiB", float64(total)/(1<<20), float64(budget)/(1<<20))
}

// loadedOptions are the estimator's options for the loaded model at
// another context and KV type, as Reconfigure would apply them.
func loadedOptions(info scheduler.ModelInfo, ctx int, t kv.Type) estimate.Options {
	return estimate.Options{Ctx: ctx, KV: t, KVGroup: info.Options.KVGroup, Backend: info.Backend, Threads: info.Estimate.Threads}
}

// reconfigured are the engine options that apply ctx and t to the loaded
// model: those in force with the cache's size and type replaced, and what
// the session resolved for the old type (the batch; the residual window,
// none for f16) left to the new type's defaults, as loadedOptions
// estimates them. The app never sets a residual window of its own.
func reconfigured(info scheduler.ModelInfo, ctx int, t kv.Type, b estimate.Budget) engine.Options {
	o := info.Options
	o.Ctx, o.KV, o.Batch, o.KVResidual, o.Budget = ctx, t, 0, 0, &b
	return o
}

// remoteAdvice adds the remote option to the advice of a load that will
// not fit, when an endpoint is configured in c: the active one, else the
// first.
func remoteAdvice(est *Estimate, c settings.Settings) {
	if est.Verdict != estimate.WillNotFit.String() {
		return
	}
	if len(c.RemoteEndpoints) == 0 {
		return
	}
	ep := c.RemoteEndpoints[0]
	if a, ok := c.FindRemote(c.ActiveRemote); ok {
		ep = a
	}
	est.Advice = append(est.Advice, fmt.Sprintf("Or use the remote model %s (Models → Remote)", ep.Name))
}
