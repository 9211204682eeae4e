package service

import (
	"errors"
	"fmt"

	"nibble/engine/estimate"
	"nibble/engine/kv"
)

// Estimate is the memory a context and KV cache type would take with the
// loaded model, for the context slider.
type Estimate struct {
	Ctx      int    `json:"ctx"`
	KV       string `json:"kv"`
	Weights  int64  `json:"weights"`
	KVBytes  int64  `json:"kvBytes"`
	Scratch  int64  `json:"scratch"`
	Overhead int64  `json:"overhead"`
	Total    int64  `json:"total"`
	Budget   int64  `json:"budget"`  // this machine's memory budget (0: unknown)
	Verdict  string `json:"verdict"` // fits, tight, will-not-fit or unknown
	MaxCtx   int    `json:"maxCtx"`  // largest context that fits with this KV type (0: none or unknown)
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
}

// Estimate evaluates the loaded model at ctx tokens (0: the default) with
// the KV type kvType ("" or "auto": q4), against this machine's budget.
func (s *Service) Estimate(ctx int, kvType string) (Estimate, error) {
	info, ok := s.sched.Info()
	if !ok {
		return Estimate{}, errors.New("estimate: no model is loaded")
	}
	if ctx < 0 {
		return Estimate{}, fmt.Errorf("estimate: context %d is negative", ctx)
	}
	if kvType == "" || kvType == "auto" {
		kvType = "q4"
	}
	t, err := kv.ParseType(kvType)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	d, err := estimate.FromFile(info.Path)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: reading %s: %w", info.Path, err)
	}
	var budget int64
	if b, err := estimate.SystemBudget(); err == nil {
		budget = b.Bytes
	}
	e, err := estimate.Evaluate(d, estimate.Options{Ctx: ctx, KV: t, Batch: info.Options.Batch, Backend: info.Backend}, budget)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	return Estimate{Ctx: e.Ctx, KV: e.KVType.String(), Weights: e.Weights, KVBytes: e.KV, Scratch: e.Scratch,
		Overhead: e.Overhead, Total: e.Total, Budget: e.Budget, Verdict: e.Verdict.String(), MaxCtx: e.MaxCtx}, nil
}
