// Package estimate predicts, before anything is loaded, how much memory a
// model needs at a given context and KV cache type (docs/ARCHITECTURE.md,
// "Memory estimator"), whether
// that fits the machine, the largest context that does, and what to change
// when it does not. Every term comes from the same size functions the
// backends allocate with, so the prediction is exact up to the measured
// runtime overhead.
package estimate

import (
	"fmt"
	"runtime"

	"nibble/engine/kv"
	"nibble/engine/model"
)

// Desc describes a model for estimation: from a GGUF header (exact weights)
// or from the catalog (approximate).
type Desc struct {
	Name         string
	HParams      model.HParams
	WeightsBytes int64 // every tensor's bytes (the mmapped weights)
	Exact        bool  // WeightsBytes summed from tensor infos; false: a listed file size
	FileType     string
	Params       int64  // parameter count, 0 if unknown
	Runnable     bool   // this engine has a forward pass for the architecture
	Source       string // path, URL or "catalog:<id>"
	// Alternatives are other downloads of the same model (from the catalog),
	// offered as "a smaller quantization" in advice.
	Alternatives []Alternative
}

// Alternative is another quantization of the same model.
type Alternative struct {
	FileType string
	Bytes    int64
	Approx   bool
	Where    string // repo/file or URL
}

// Options are the run settings the estimate is for. Zero values take the
// loader's defaults, so an estimate and a load with the same Options agree.
type Options struct {
	Ctx      int     // context budget in tokens (0: min(trained context, 4096))
	KV       kv.Type // cache element type
	KVGroup  int     // q8/q4 group size (0: 32)
	Batch    int     // prefill batch (0: 512); never more than Ctx, as in the loader
	Backend  string  // a registered backend's name (backend.RegisterFootprint): "cpu" (default), "metal"
	Threads  int     // worker threads (0: GOMAXPROCS, the CPU backend's default)
	Overhead int64   // runtime overhead in bytes (0: the backend's, measured per backend)
	// KVResidual is the quantized cache's f16 residual window in positions,
	// as engine.Options has it: 0 the type's default (kv.DefaultResidual),
	// negative none.
	KVResidual int
	// Evict is the cache's eviction budget as engine.Options resolves it
	// (kv.Config.Evict): only the budget's positions are counted.
	Evict kv.Eviction
}

// withDefaults applies the session's size defaults and the CPU backend's.
func (o Options) withDefaults(hp model.HParams) Options {
	o.Ctx, o.Batch, o.KVGroup = model.SessionSizes(hp, o.Ctx, o.Batch, o.KVGroup)
	if o.Evict.Policy != kv.EvictNone {
		o.Evict.Budget = min(o.Evict.Budget, o.Ctx)
		o.Batch = min(o.Batch, o.Evict.MaxBatch())
	}
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.KVResidual == 0 {
		o.KVResidual = -1
		if _, err := footprint(o.Backend); err == nil {
			if w := kv.DefaultResidual(o.KV); w > 0 {
				o.KVResidual = w
			}
		}
	}
	return o
}

// Verdict grades an estimate against a budget.
type Verdict uint8

const (
	Unknown    Verdict = iota // no budget given
	Fits                      // at most TightFraction of the budget
	Tight                     // fits, but above TightFraction of the budget
	WillNotFit                // exceeds the budget
)

// TightFraction is where "fits" becomes "tight".
const TightFraction = 0.85

func (v Verdict) String() string {
	switch v {
	case Fits:
		return "fits"
	case Tight:
		return "tight"
	case WillNotFit:
		return "will-not-fit"
	}
	return "unknown"
}

func grade(total, budget int64) Verdict {
	switch {
	case budget <= 0:
		return Unknown
	case total > budget:
		return WillNotFit
	case float64(total) > TightFraction*float64(budget):
		return Tight
	}
	return Fits
}

// Estimate is the memory breakdown of one configuration.
type Estimate struct {
	Model        string
	Ctx          int
	KVType       kv.Type
	KVGroup      int
	Batch        int
	Backend      string
	Threads      int
	WeightsExact bool

	Weights  int64 // mmapped tensor data
	KV       int64 // kv.Config.Bytes(): exactly what the cache allocates
	Scratch  int64 // activations + attention workspace (split-K partials, prefill staging, worker slots)
	Overhead int64 // runtime: Go runtime, tokenizer, parsed metadata, matmul scratch pools
	Total    int64

	Budget  int64   // 0 when computed without one
	Verdict Verdict // Unknown without a budget
	MaxCtx  int     // largest context that fits the budget with this KV type (0: none)
}

// Allocated is what the backend allocates plus the mapped weights: the
// estimate without the runtime overhead, comparable to
// backend.AllocatedBytes() + weights.
func (e *Estimate) Allocated() int64 { return e.Weights + e.KV + e.Scratch }

// KVConfig is the cache the options give hp (after defaults): with rings
// for sliding-window layers, as model.NewState asks for, on a backend with
// a registered footprint.
func KVConfig(hp model.HParams, o Options) kv.Config {
	o = o.withDefaults(hp)
	cfg := kv.Config{Type: o.KV, GroupSize: o.KVGroup, Ctx: o.Ctx, Residual: max(o.KVResidual, 0), Evict: o.Evict}
	// One cache layer per layer that stores K/V (Gemma 4's shared layers
	// read another's: counted once), each in its head shape.
	_, err := footprint(o.Backend)
	return hp.CacheConfig(cfg, err == nil)
}

// Compute is the breakdown for d under o, without a budget.
func Compute(d Desc, o Options) (*Estimate, error) {
	hp := d.HParams
	o = o.withDefaults(hp)
	cfg := KVConfig(hp, o)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("estimate %s: %w", d.Name, err)
	}
	if d.WeightsBytes < 0 {
		return nil, fmt.Errorf("estimate %s: negative weights size %d", d.Name, d.WeightsBytes)
	}
	f, err := footprint(o.Backend)
	if err != nil {
		return nil, err
	}
	over := o.Overhead
	if over <= 0 {
		over = f.OverheadBytes(shape(hp), o.Batch)
	}
	e := &Estimate{
		Model: d.Name, Ctx: o.Ctx, KVType: o.KV, KVGroup: o.KVGroup, Batch: o.Batch,
		Backend: o.Backend, Threads: o.Threads, WeightsExact: d.Exact,
		Weights: d.WeightsBytes, KV: cfg.Bytes(), Scratch: scratchBytes(f, hp, cfg, o.Batch, o.Threads), Overhead: over,
	}
	e.Total = e.Weights + e.KV + e.Scratch + e.Overhead
	return e, nil
}

// Evaluate is Compute plus the verdict and the largest fitting context for
// budget bytes (budget <= 0: no verdict).
func Evaluate(d Desc, o Options, budget int64) (*Estimate, error) {
	e, err := Compute(d, o)
	if err != nil {
		return nil, err
	}
	if budget > 0 {
		e.Budget = budget
		e.Verdict = grade(e.Total, budget)
		e.MaxCtx = MaxContext(d, o, budget)
	}
	return e, nil
}
