package estimate

import "nibble/engine/kv"

// Limit is the largest context one KV cache type fits in a budget.
type Limit struct {
	KV      kv.Type
	KVBytes int64 // the cache at the context asked for
	MaxCtx  int   // 0: not even one token fits (or no budget)
}

// Fit is the one computation a fit report's figures come from: the
// estimate of the configuration asked for, the largest context of every KV
// type, and the advice worded from those same figures, so a report never
// names two different largest contexts for one type.
type Fit struct {
	Estimate *Estimate // MaxCtx is its type's Limit
	Limits   []Limit   // q4, q8, f16; a type the head dim does not suit is left out
	Advice   []string  // empty when it fits comfortably or there is no budget
}

// limitTypes are the KV types a fit compares, most compact first.
var limitTypes = []kv.Type{kv.Q4, kv.Q8, kv.F16}

// Assess evaluates d under o against b. Every type's options are o with
// the type replaced before defaults are applied, so what a type resolves
// by default (its residual window) is that type's own, as a load or a
// reconfiguration with it would have it. ctxCap > 0 caps every largest
// context (an app whose slider ends at the trained context); 0 leaves them
// as memory bounds, and advice that proposes one past the trained context
// says so.
func Assess(d Desc, o Options, b Budget, ctxCap int) (*Fit, error) {
	e, err := Compute(d, o)
	if err != nil {
		return nil, err
	}
	if b.Bytes > 0 {
		e.Budget = b.Bytes
		e.Verdict = grade(e.Total, b.Bytes)
	}
	f := &Fit{Estimate: e, Limits: []Limit{}}
	for _, t := range limitTypes {
		ot := o
		ot.KV = t
		et, err := Compute(d, ot)
		if err != nil {
			continue // e.g. head dim not a multiple of the group
		}
		l := Limit{KV: t, KVBytes: et.KV}
		if b.Bytes > 0 {
			l.MaxCtx = capContext(MaxContext(d, ot, b.Bytes), ctxCap)
		}
		f.Limits = append(f.Limits, l)
	}
	if b.Bytes > 0 {
		if l, ok := f.Limit(o.KV); ok {
			e.MaxCtx = l.MaxCtx
		} else {
			e.MaxCtx = capContext(MaxContext(d, o, b.Bytes), ctxCap)
		}
	}
	f.Advice = advise(d, o, b, f, ctxCap)
	return f, nil
}

// Limit is t's limit, if the fit has one.
func (f *Fit) Limit(t kv.Type) (Limit, bool) {
	for _, l := range f.Limits {
		if l.KV == t {
			return l, true
		}
	}
	return Limit{}, false
}

// capContext caps a largest context at ctxCap (0: no cap).
func capContext(n, ctxCap int) int {
	if ctxCap > 0 && n > ctxCap {
		return ctxCap
	}
	return n
}
