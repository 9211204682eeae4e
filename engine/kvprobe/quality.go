package kvprobe

import (
	"fmt"
	"math"
	"slices"

	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/engine/numeric"
	"nibble/engine/sample"
)

// Quality is how far one quantized cache type moves the model from f16.
type Quality struct {
	Cosine        float64 `json:"cosine"`         // of last-position logits
	Top1Agreement float64 `json:"top1_agreement"` // argmax equal to f16's, over prompt positions
	MaxAbsDLogit  float64 `json:"max_abs_dlogit"` // over all positions and vocab
	GreedyAgree   int     `json:"greedy_agree"`   // greedy tokens equal to f16's, as a prefix
	GreedyTotal   int     `json:"greedy_total"`
	// GreedyForced counts the steps whose argmax equals f16's greedy token
	// when both are fed f16's continuation (teacher forcing): one near-tie
	// ends GreedyAgree's prefix, but costs GreedyForced a single step.
	GreedyForced int `json:"greedy_teacher_forced"`
}

// QualityReport is the probe's result.
type QualityReport struct {
	Types map[kv.Type]*Quality
	// Floor compares f16 with f16 run at FloorBatch instead of Batch: the
	// same arithmetic in another order. Figures no cache type can beat, as
	// low as these random-weight models' 8-bit activation rounding makes them.
	Floor      *Quality
	FloorBatch int
	// Rotated says which quantized types stored K rotated (Rotate resolved
	// per type and for the backend).
	Rotated map[kv.Type]bool
}

// QualityOptions configure the probe.
type QualityOptions struct {
	Batch     int // prompt rows per forward call; 1 makes every position read the cache
	Greedy    int // continuation length compared
	GroupSize int
	// Rotate is the quantized caches' rotation of K, resolved per type as
	// sessions resolve it (auto: q4 only, where the backend rotates the
	// head dim).
	Rotate   kv.RotateMode
	NoSmooth bool // quantized caches store K without channel smoothing
	// Residual is the f16 residual window of the quantized caches: negative
	// gives each type its default (kv.DefaultResidual), 0 none.
	Residual int
}

// MeasureQuality runs prompt through m with an f16 cache and with each
// quantized type, comparing logits position by position. With Batch 1 every
// prompt position attends through the decode kernel to the quantized cache
// (the strict case); larger batches use hybrid prefill as generation does.
func MeasureQuality(m *engine.Model, b backend.Backend, prompt []int32, types []kv.Type, o QualityOptions) (*QualityReport, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("kv quality: empty prompt")
	}
	if err := m.CheckBackend(b); err != nil {
		return nil, fmt.Errorf("kv quality: %w", err)
	}
	o.Batch = max(o.Batch, 1)
	if o.GroupSize == 0 {
		o.GroupSize = kv.DefaultGroupSize
	}
	rep := &QualityReport{Types: map[kv.Type]*Quality{}, FloorBatch: 16, Rotated: map[kv.Type]bool{}}
	for _, t := range types {
		so, err := engine.Options{KV: t, KVRotate: o.Rotate}.ResolveRotate(b, m.HP)
		if err != nil {
			return nil, fmt.Errorf("kv quality (%s): %w", t, err)
		}
		rep.Rotated[t] = so.KVRotated
	}
	run := func(t kv.Type, batch int, forced []int32) ([][]float32, []int32, error) {
		residual := o.Residual
		if residual < 0 {
			residual = kv.DefaultResidual(t)
		}
		cfg := kv.Config{Type: t, GroupSize: o.GroupSize, Rotate: rep.Rotated[t], Smooth: !o.NoSmooth, Residual: residual}
		return probeRun(m, prompt, cfg, batch, o.Greedy, forced)
	}
	base, baseGreedy, err := run(kv.F16, o.Batch, nil)
	if err != nil {
		return nil, fmt.Errorf("kv quality (f16): %w", err)
	}
	compare := func(rows [][]float32, greedy []int32) *Quality {
		return compareRuns(base, baseGreedy, rows, greedy)
	}
	if o.Batch > 1 {
		rep.FloorBatch = 1
	}
	rows, greedy, err := run(kv.F16, rep.FloorBatch, baseGreedy)
	if err != nil {
		return nil, fmt.Errorf("kv quality (f16 floor): %w", err)
	}
	rep.Floor = compare(rows, greedy)
	for _, t := range types {
		if t == kv.F16 {
			continue
		}
		rows, greedy, err := run(t, o.Batch, baseGreedy)
		if err != nil {
			return nil, fmt.Errorf("kv quality (%s): %w", t, err)
		}
		rep.Types[t] = compare(rows, greedy)
	}
	return rep, nil
}

// probeRun runs prompt through a fresh state of cfg (its Ctx is set here),
// batch positions per forward call, and returns the logits of every prompt
// position and the argmax of each of greedy continuation steps; forced (when
// set) is fed as the continuation.
func probeRun(m *engine.Model, prompt []int32, cfg kv.Config, batch, greedy int, forced []int32) (rows [][]float32, tokens []int32, err error) {
	cfg.Ctx = len(prompt) + greedy + 1
	st, err := m.NewState(cfg, min(batch, len(prompt)))
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	for pos := 0; pos < len(prompt); pos += batch {
		end := min(len(prompt), pos+batch)
		if err := st.ForwardAll(prompt[pos:end], pos, func(_ int, l []float32) { rows = append(rows, slices.Clone(l)) }); err != nil {
			return nil, nil, err
		}
	}
	logits := slices.Clone(rows[len(rows)-1])
	for i := 0; i < greedy; i++ {
		tok := sample.Greedy(logits)
		tokens = append(tokens, tok)
		if forced != nil {
			tok = forced[i]
		}
		if i+1 < greedy {
			if err := st.Forward([]int32{tok}, len(prompt)+i, logits); err != nil {
				return nil, nil, err
			}
		}
	}
	return rows, tokens, nil
}

// compareRuns measures rows and greedy against the f16 run's base and
// baseGreedy.
func compareRuns(base [][]float32, baseGreedy []int32, rows [][]float32, greedy []int32) *Quality {
	q := &Quality{GreedyTotal: len(baseGreedy)}
	hits := 0
	for i := range rows {
		if sample.Greedy(rows[i]) == sample.Greedy(base[i]) {
			hits++
		}
		for j, v := range rows[i] {
			q.MaxAbsDLogit = max(q.MaxAbsDLogit, math.Abs(float64(v-base[i][j])))
		}
	}
	q.Top1Agreement = float64(hits) / float64(len(rows))
	q.Cosine = numeric.Cosine(rows[len(rows)-1], base[len(base)-1])
	for i := range greedy {
		if greedy[i] == baseGreedy[i] {
			q.GreedyForced++
			if q.GreedyAgree == i {
				q.GreedyAgree++
			}
		}
	}
	return q
}
