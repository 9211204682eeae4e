package estimate

import (
	"fmt"

	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/sysmem"
)

// minUsefulCtx is the smallest context worth suggesting.
const minUsefulCtx = 256

// Advise lists concrete changes that make d fit (or leave headroom when it
// is tight): a smaller --ctx, a more compact KV type, a smaller
// quantization, and on macOS the exact iogpu.wired_limit_mb to set. Empty
// when the configuration fits comfortably. It is Assess's advice, with
// the largest contexts uncapped.
func Advise(d Desc, o Options, b Budget) ([]string, error) {
	f, err := Assess(d, o, b, 0)
	if err != nil {
		return nil, err
	}
	return f.Advice, nil
}

// advise words the advice for f, the fit of d under o (o as the caller
// gave it, before defaults): every largest context it names is one of f's.
func advise(d Desc, o Options, b Budget, f *Fit, ctxCap int) []string {
	e := f.Estimate
	if e.Verdict != WillNotFit && e.Verdict != Tight {
		return nil
	}
	asked := o
	o = o.withDefaults(d.HParams)
	var adv []string
	add := func(format string, args ...any) { adv = append(adv, fmt.Sprintf(format, args...)) }

	fixed := e.Weights + e.Overhead
	if fixed >= b.Bytes {
		add("the weights (%s) and runtime overhead (%s) alone exceed the %s budget: no context fits", Human(e.Weights), Human(e.Overhead), Human(b.Bytes))
	}

	// A smaller context with the same KV type.
	if e.Verdict == WillNotFit && e.MaxCtx >= minUsefulCtx {
		add("use a smaller context: %s is the largest that fits with %s KV (total %s of %s)", ctxFlag(e.MaxCtx, d.HParams), o.KV, Human(totalAt(d, asked, e.MaxCtx)), Human(b.Bytes))
	}
	if e.Verdict == Tight {
		lim := int64(TightFraction * float64(b.Bytes))
		if c := capContext(MaxContext(d, asked, lim), ctxCap); c >= minUsefulCtx && c < e.Ctx {
			add("it fits but uses %.0f%% of the budget; %s stays under %.0f%% with %s KV", 100*float64(e.Total)/float64(b.Bytes), ctxFlag(c, d.HParams), 100*TightFraction, o.KV)
		}
	}

	// A more compact KV cache at the requested context.
	for _, t := range []kv.Type{kv.Q8, kv.Q4} {
		if kv.BytesPerTokenHead(t, d.HParams.HeadDim, o.KVGroup) >= kv.BytesPerTokenHead(o.KV, d.HParams.HeadDim, o.KVGroup) {
			continue
		}
		l, ok := f.Limit(t)
		if !ok {
			continue // e.g. head dim not a multiple of the group
		}
		o2 := asked
		o2.KV = t
		e2, err := Compute(d, o2)
		if err != nil {
			continue
		}
		v2 := grade(e2.Total, b.Bytes)
		switch {
		case v2 == Fits || (v2 == Tight && e.Verdict == WillNotFit):
			add("store the KV cache as %s: --kv %s needs %s of KV at --ctx %d (total %s: %s); its largest context is %s",
				t, t, Human(e2.KV), o.Ctx, Human(e2.Total), v2, ctxFlag(l.MaxCtx, d.HParams))
		case l.MaxCtx >= minUsefulCtx && l.MaxCtx > e.MaxCtx:
			add("with --kv %s the largest context that fits is %s", t, ctxFlag(l.MaxCtx, d.HParams))
		}
	}

	// Eviction: keep the whole context's positions but only a budget's KV.
	if e.Verdict == WillNotFit && o.Evict.Policy == kv.EvictNone && d.HParams.Window == 0 {
		if budget, e2 := MaxEvictBudget(d, asked, b.Bytes); budget > 0 {
			add("keep the most useful tokens instead: --evict h2o:%d holds %d of the %d positions (attention sinks, the tokens attention weighted most and the recent ones; %s of KV, total %s)",
				budget, budget, o.Ctx, Human(e2.KV), Human(e2.Total))
		}
	}

	// A smaller quantization: with the requested KV type, or, when no
	// change of context or KV type alone helps, together with q4 KV.
	s := smallerQuant(d, asked, b.Bytes)
	if s == "" && len(adv) == 0 || s == "" && fixed >= b.Bytes {
		o2 := asked
		o2.KV = kv.Q4
		s = smallerQuant(d, o2, b.Bytes)
	}
	if s != "" {
		adv = append(adv, s)
	} else if fixed >= b.Bytes {
		// Nothing about this model fits: say how big a model would.
		room := b.Bytes - e.Overhead - (e.Total - e.Weights - e.Overhead)
		if room > 0 {
			add("choose a smaller model: weights up to %s fit at --ctx %d (about %.1fB parameters at Q4_K_M)",
				Human(room), o.Ctx, float64(room)*8/4.85/1e9)
		} else {
			add("this machine's budget (%s) is too small for any model at --ctx %d", Human(b.Bytes), o.Ctx)
		}
	}
	adv = append(adv, wiredAdvice(e, b)...)
	return adv
}

// MaxEvictBudget is the largest H2O budget, at least minUsefulCtx and
// below o.Ctx, with which d under o fits in budget bytes, and its estimate
// (0, nil: none fits). Memory grows with the budget, so a bisection finds it.
func MaxEvictBudget(d Desc, o Options, budget int64) (int, *Estimate) {
	o = o.withDefaults(d.HParams)
	at := func(n int) *Estimate {
		o2 := o
		o2.Evict = kv.DefaultEviction(kv.EvictH2O, n)
		e, err := Compute(d, o2)
		if err != nil || e.Total > budget {
			return nil
		}
		return e
	}
	lo, hi := minUsefulCtx, o.Ctx // at(lo) fits, at(hi) does not
	best := at(lo)
	if best == nil || lo >= hi {
		return 0, nil
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if e := at(mid); e != nil {
			lo, best = mid, e
		} else {
			hi = mid
		}
	}
	return lo, best
}

// ctxFlag formats a context the advice proposes. Memory alone may allow more than the model
// was trained on, but positions past the trained context (when known) degrade the output
// unless RoPE is scaled, so such a proposal says so.
func ctxFlag(n int, hp model.HParams) string {
	if hp.CtxTrain > 0 && n > hp.CtxTrain {
		return fmt.Sprintf("--ctx %d (above the trained context of %d; needs RoPE scaling)", n, hp.CtxTrain)
	}
	return fmt.Sprintf("--ctx %d", n)
}

// totalAt is the total for o at another context.
func totalAt(d Desc, o Options, ctx int) int64 {
	o.Ctx = ctx
	e, err := Compute(d, o)
	if err != nil {
		return 0
	}
	return e.Total
}

// wiredAdvice: on macOS, when the GPU wired cap (not the RAM) is what the
// model exceeds, the exact sysctl that lifts it, as long as that leaves
// sysmem.WiredSafetyMargin of RAM to the system.
func wiredAdvice(e *Estimate, b Budget) []string {
	if b.Simulated || b.OS != "darwin" || b.GPUCap <= 0 || b.TotalRAM <= 0 || e.Total <= b.GPUCap {
		return nil
	}
	ceiling := int64(sysmem.MaxWiredLimit(uint64(b.TotalRAM)))
	if e.Total > ceiling {
		return nil // raising the limit that far would starve macOS
	}
	var out []string
	// Round the need up to a whole GiB plus half a GiB of slack for the
	// driver's own allocations, but never above the safety ceiling.
	const mib = 1 << 20
	need := min((e.Total+(1<<29)+(1<<30)-1)/(1<<30)*1024, ceiling/mib)
	out = append(out, fmt.Sprintf("raise the GPU wired-memory limit (now %s): sudo sysctl iogpu.wired_limit_mb=%d (leaves %s of %s RAM to macOS; resets at reboot)",
		Human(b.GPUCap), need, Human(b.TotalRAM-need*mib), Human(b.TotalRAM)))
	if b.AvailableRAM > 0 && e.Total > b.AvailableRAM {
		out = append(out, fmt.Sprintf("close other applications: only %s of RAM is free or reclaimable now and the model needs %s", Human(b.AvailableRAM), Human(e.Total)))
	}
	return out
}

// standardQuants are llama.cpp file types with typical bits per weight of
// a whole file (a 7-8B model), used to size smaller quantizations of a
// local or remote file when the catalog has none listed.
var standardQuants = []struct {
	name string
	bpw  float64
}{{"Q8_0", 8.5}, {"Q6_K", 6.56}, {"Q5_K_M", 5.7}, {"Q4_K_M", 4.85}, {"Q3_K_M", 3.9}, {"Q2_K", 3.35}}

// smallerQuant names the largest smaller quantization that fits under o.
func smallerQuant(d Desc, o Options, budget int64) string {
	type cand struct {
		name   string
		bytes  int64
		approx bool
		where  string
	}
	var cands []cand
	for _, a := range d.Alternatives {
		if a.Bytes < d.WeightsBytes {
			cands = append(cands, cand{a.FileType, a.Bytes, a.Approx, a.Where})
		}
	}
	if len(cands) == 0 && d.Params > 0 {
		cur := float64(d.WeightsBytes) * 8 / float64(d.Params)
		for _, q := range standardQuants {
			if q.bpw < cur-0.3 {
				cands = append(cands, cand{q.name, int64(q.bpw / 8 * float64(d.Params)), true, ""})
			}
		}
	}
	for _, c := range cands { // largest first: the catalog and the table are ordered that way
		d2 := d
		d2.WeightsBytes = c.bytes
		e, err := Compute(d2, o)
		if err != nil || e.Total > budget {
			continue
		}
		size := Human(c.bytes)
		if c.approx {
			size = "≈ " + size
		}
		where := ""
		if c.where != "" {
			where = ", " + c.where
		}
		return fmt.Sprintf("use a smaller quantization: %s (%s%s) fits at --ctx %d with --kv %s (total %s: %s)",
			c.name, size, where, e.Ctx, e.KVType, Human(e.Total), grade(e.Total, budget))
	}
	return ""
}
