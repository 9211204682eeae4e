package estimate

import (
	"fmt"

	"nibble/engine/kv"
)

// Report compares the KV cache types side by side for one model, context
// and budget, with advice for the requested type.
type Report struct {
	Desc   Desc
	Opts   Options // after defaults; Opts.KV is the requested type
	Budget Budget
	// Types holds one estimate per kv.Types entry (f16, q8, q4); nil where
	// the model's head dim does not suit the type's group size.
	Types  []*Estimate
	Advice []string
}

// NewReport evaluates every KV type. The advice is Advise for the requested
// type, plus the largest context for each other type that does not fit.
// Each type's options are o with the type replaced before defaults, as
// Assess has them, so each column's largest context is the advice's.
func NewReport(d Desc, o Options, b Budget) (*Report, error) {
	f, err := Assess(d, o, b, 0)
	if err != nil {
		return nil, err
	}
	r := &Report{Desc: d, Opts: o.withDefaults(d.HParams), Budget: b, Advice: f.Advice}
	for _, t := range kv.Types {
		ot := o
		ot.KV = t
		e, err := Compute(d, ot)
		if err != nil {
			r.Types = append(r.Types, nil)
			continue
		}
		if l, ok := f.Limit(t); ok && b.Bytes > 0 {
			e.Budget, e.Verdict, e.MaxCtx = b.Bytes, grade(e.Total, b.Bytes), l.MaxCtx
		}
		r.Types = append(r.Types, e)
	}
	for _, e := range r.Types {
		if e == nil || e.KVType == r.Opts.KV || e.Verdict != WillNotFit {
			continue
		}
		if e.MaxCtx >= minUsefulCtx {
			r.Advice = append(r.Advice, fmt.Sprintf("with --kv %s it will not fit at --ctx %d (%s); %s is the largest that does", e.KVType, e.Ctx, Human(e.Total), ctxFlag(e.MaxCtx, d.HParams)))
		} else {
			r.Advice = append(r.Advice, fmt.Sprintf("with --kv %s it will not fit at any context (%s at --ctx %d)", e.KVType, Human(e.Total), e.Ctx))
		}
	}
	return r, nil
}

// Chosen is the estimate for the requested KV type.
func (r *Report) Chosen() *Estimate {
	for _, e := range r.Types {
		if e != nil && e.KVType == r.Opts.KV {
			return e
		}
	}
	return nil
}

// TypeJSON is one KV type's column in `nibble estimate --json`.
type TypeJSON struct {
	WeightsBytes  int64  `json:"weights_bytes"`
	KVBytes       int64  `json:"kv_bytes"`
	ScratchBytes  int64  `json:"scratch_bytes"`
	OverheadBytes int64  `json:"overhead_bytes"`
	TotalBytes    int64  `json:"total_bytes"`
	Verdict       string `json:"verdict"`
	MaxCtx        int    `json:"max_ctx"`
}

// ReportJSON is the `nibble estimate --json` document.
type ReportJSON struct {
	Model       string `json:"model"`
	Ctx         int    `json:"ctx"`
	BudgetBytes int64  `json:"budget_bytes"`
	// ActiveBytes are the weight bytes one decode token reads; every
	// type's weights_bytes are resident. Experts and ExpertsUsed are a
	// mixture of experts' counts per layer and per token.
	ActiveBytes int64     `json:"active_bytes"`
	Experts     int       `json:"experts,omitempty"`
	ExpertsUsed int       `json:"experts_used,omitempty"`
	Types       TypesJSON `json:"types"`
	Advice      []string  `json:"advice"`
}

// TypesJSON keeps the columns in the order f16, q8, q4; a type the model
// cannot use (head dim vs group size) is left out.
type TypesJSON struct {
	F16 *TypeJSON `json:"f16,omitempty"`
	Q8  *TypeJSON `json:"q8,omitempty"`
	Q4  *TypeJSON `json:"q4,omitempty"`
}

// JSON converts the report.
func (r *Report) JSON() ReportJSON {
	j := ReportJSON{Model: r.Desc.Name, Ctx: r.Opts.Ctx, BudgetBytes: r.Budget.Bytes, Advice: r.Advice,
		ActiveBytes: r.Desc.ActiveBytes, Experts: r.Desc.Experts.Count, ExpertsUsed: r.Desc.Experts.Used}
	if j.Advice == nil {
		j.Advice = []string{}
	}
	for _, e := range r.Types {
		if e == nil {
			continue
		}
		t := &TypeJSON{
			WeightsBytes: e.Weights, KVBytes: e.KV, ScratchBytes: e.Scratch, OverheadBytes: e.Overhead,
			TotalBytes: e.Total, Verdict: e.Verdict.String(), MaxCtx: e.MaxCtx,
		}
		switch e.KVType {
		case kv.F16:
			j.Types.F16 = t
		case kv.Q8:
			j.Types.Q8 = t
		case kv.Q4:
			j.Types.Q4 = t
		}
	}
	return j
}
