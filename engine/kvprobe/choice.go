// Package kvprobe measures how far a quantized KV cache moves a model from
// f16 and picks the cache mode a model runs with: Choose (a short probe run
// when a model loads) and MeasureQuality (the strict bar of the benches and
// the CLI's kvcheck).
package kvprobe

import (
	"fmt"
	"math"
	"slices"
	"time"

	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/numeric"
	"nibble/engine/sample"
)

// probeText is the built-in text Choose runs: plain English prose of
// about 300 tokens, long enough that most positions attend over a quantized
// history, short enough that the probe adds little to a model load.
const probeText = `The old lighthouse stood at the end of a narrow spit of land, where the river met the sea. ` +
	`For more than a century its keepers had climbed the spiral stairs every evening to light the lamp, ` +
	`and every morning they had written a few lines in the log: the weather, the ships that passed, ` +
	`the birds that rested on the gallery rail. When the light was finally automated, the last keeper, ` +
	`a patient woman named Ada Marsh, packed the logbooks into wooden crates and carried them to the ` +
	`town library. The librarian, who had expected a box or two, found herself with forty volumes ` +
	`covering one hundred and twelve years. She began to read them in the evenings. At first the entries ` +
	`seemed repetitive: wind from the west, light rain, two fishing boats returned before dark. But over ` +
	`the months a pattern emerged. The winters grew milder, the storms arrived later in the autumn, and ` +
	`the swallows that once left in early September now stayed until October. A keeper in 1911 had noted ` +
	`ice on the harbour for nineteen days; by the 1990s the harbour had not frozen once. The librarian ` +
	`wrote to a university, and a small team of students spent a summer turning the handwriting into ` +
	`tables. Their report was short and careful. It did not claim more than the records could support, ` +
	`but it showed, in plain numbers, how a single coastline had changed within the span of three lives. ` +
	`Ada Marsh read the report at her kitchen table, and then she walked out to the spit to watch the light come on by itself.`

// Candidate is one cache mode the probe measured.
type Candidate struct {
	Type    kv.Type `json:"type"`
	Rotate  bool    `json:"rotate"`
	Quality Quality `json:"quality"`
	Passed  bool    `json:"passed"`
	// Skipped says why a measured candidate is not eligible (an attention
	// scale that rules out plain q4).
	Skipped string `json:"skipped,omitempty"`
	// Info marks a row measured for information only, never chosen: plain
	// q4 beside the default rotated q4.
	Info bool `json:"info,omitempty"`
}

// Label names the candidate as the benches' KV modes do: q4-rot,
// q4-plain, q8.
func (c Candidate) Label() string {
	switch {
	case c.Rotate:
		return c.Type.String() + "-rot"
	case c.Type == kv.Q4:
		return c.Type.String() + "-plain"
	}
	return c.Type.String()
}

// Choice is Choose's result.
type Choice struct {
	Type       kv.Type     `json:"type"`
	Rotate     bool        `json:"rotate"`
	Candidates []Candidate `json:"candidates"`
	// ScaleRatio is the model's q·k scale over 1/sqrt(head dim), at the
	// layer where it is largest: 1 for most models, sqrt(head dim) for an
	// attention scale of 1.0 (the widest heads' where layers differ).
	ScaleRatio float64       `json:"scale_ratio"`
	Tokens     int           `json:"tokens"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	Reason     string        `json:"reason"`
}

// Chosen returns the candidate that was picked.
func (c *Choice) Chosen() Candidate {
	for _, cand := range c.Candidates {
		if cand.Type == c.Type && cand.Rotate == c.Rotate && !cand.Info {
			return cand
		}
	}
	return Candidate{Type: c.Type, Rotate: c.Rotate}
}

// Summary is one line for the model's info: "q4-rot (top-1 99.3%, cos
// 0.99998): reason".
func (c *Choice) Summary() string {
	ch := c.Chosen()
	return fmt.Sprintf("%s (top-1 %.1f%%, cos %.5f): %s", ch.Label(), 100*ch.Quality.Top1Agreement, ch.Quality.Cosine, c.Reason)
}

// ChoiceOptions tune Choose; zero values take the defaults below.
type ChoiceOptions struct {
	Batch     int     // prompt rows per forward call (DefaultBatch)
	MinTop1   float64 // top-1 agreement with f16 a candidate needs (DefaultMinTop1)
	MinCosine float64 // last-position logit cosine a candidate needs (DefaultMinCosine)
	// MaxScaleRatio is the largest ScaleRatio at which plain q4 may be
	// chosen (DefaultMaxScaleRatio).
	MaxScaleRatio float64
	Prompt        []int32 // token ids in place of the built-in text (tests)
	// Residual is the f16 residual window the quantized caches run with:
	// negative gives each type its default (kv.DefaultResidual), as
	// sessions do; 0 none.
	Residual int
}

// The thresholds come from Choose's figures on the built-in text at batch
// 16 with the CPU's residual window (choice_test.go prints them): the
// trained model's plain q4 keeps top-1 95.1%, cosine 0.99988 (q8 99.4%,
// 0.999999); synth models with outlier key channels or an attention scale
// of 0.5–1.0 drop plain q4 to top-1 48–72%, cosine 0.74–0.98, while their q8
// keeps 94–97%, cosine ≥ 0.9998. 90% and 0.999 sit between the two with
// room on both sides. Random-weight models are noisier than trained ones
// (f16 against itself in another order moves their top-1 by 1.5–3%), so
// their q4 fails here too: 80% on a plain synth model.
const (
	DefaultBatch         = 16
	DefaultMinTop1       = 0.90
	DefaultMinCosine     = 0.999
	DefaultMaxScaleRatio = 2
)

// Choose picks the cache mode for m: the default q4 (K rotated, where b
// rotates the head dim), or else q8, whichever comes first with logits over
// a short built-in text that stay close to an f16 cache's (top-1 agreement
// and last-position cosine above the thresholds). Plain q4 is measured
// beside rotated q4 for information. A model whose attention scale is well
// above 1/sqrt(head dim) turns quantization error in q·k into large logit
// error, so plain q4 is not eligible there (on a backend that cannot
// rotate, q8). The quantized caches run with o.Residual's f16 window; with
// none (0, or a backend that reads no window) every position beyond the
// batch reads quantized K and V.
func Choose(m *engine.Model, b backend.Backend, o ChoiceOptions) (*Choice, error) {
	p, err := New(m, b, o)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	for {
		done, err := p.Step()
		if err != nil {
			return nil, err
		}
		if done {
			return p.Result(), nil
		}
	}
}

// Probe is Choose one forward batch at a time, so that the engine
// service can run it in the background between replies: each Step runs one
// batch of one of the runs (f16, then each candidate) and returns.
type Probe struct {
	m       *engine.Model
	o       ChoiceOptions
	headDim int // of the layer whose q·k scale is largest against 1/sqrt(head dim)
	prompt  []int32
	runs    []kv.Config // f16, then one per candidate
	cands   []Candidate // the candidates, in the order they are measured
	c       *Choice

	run, pos int
	st       *model.State
	base     [][]float32 // the f16 run's logits, one row per prompt position
	// The current candidate run against base, row by row (its rows are not
	// kept: for a large vocabulary they are most of the probe's memory).
	hits   int
	maxAbs float64
	last   []float32
	done   bool
}

// New checks m, b and o and prepares the probe; nothing runs until
// Step. Close releases what a probe left unfinished holds.
func New(m *engine.Model, b backend.Backend, o ChoiceOptions) (*Probe, error) {
	if err := m.CheckBackend(b); err != nil {
		return nil, fmt.Errorf("kv choice: %w", err)
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.MinTop1 == 0 {
		o.MinTop1 = DefaultMinTop1
	}
	if o.MinCosine == 0 {
		o.MinCosine = DefaultMinCosine
	}
	if o.MaxScaleRatio == 0 {
		o.MaxScaleRatio = DefaultMaxScaleRatio
	}
	prompt := o.Prompt
	if prompt == nil {
		prompt = m.EncodePrompt(probeText)
	}
	if len(prompt) < 2*o.Batch {
		return nil, fmt.Errorf("kv choice: %d prompt tokens, want at least %d", len(prompt), 2*o.Batch)
	}
	ratio, hd := scaleRatio(m.HP)
	p := &Probe{m: m, o: o, prompt: prompt, headDim: hd, c: &Choice{Tokens: len(prompt), ScaleRatio: ratio}}
	defaultQ4, err := engine.Options{KV: kv.Q4}.ResolveRotate(b, m.HP)
	if err != nil {
		return nil, fmt.Errorf("kv choice: %w", err)
	}
	p.cands = []Candidate{{Type: kv.Q4, Rotate: defaultQ4.KVRotated}, {Type: kv.Q8}}
	if defaultQ4.KVRotated {
		p.cands = append(p.cands, Candidate{Type: kv.Q4, Info: true})
	}
	p.runs = []kv.Config{{Type: kv.F16, GroupSize: kv.DefaultGroupSize}}
	for _, cand := range p.cands {
		residual := o.Residual
		if residual < 0 {
			residual = kv.DefaultResidual(cand.Type)
		}
		p.runs = append(p.runs, kv.Config{Type: cand.Type, GroupSize: kv.DefaultGroupSize, Rotate: cand.Rotate, Smooth: true, Residual: residual})
	}
	return p, nil
}

// scaleRatio is hp's q·k scale over 1/sqrt(head dim) at the layer where
// it is largest, and that layer's head dim: with a scale fixed for every
// layer (Gemma 4's 1.0), the widest heads'.
func scaleRatio(hp model.HParams) (float64, int) {
	ratio, hd := 0.0, hp.HeadDim
	for il := range hp.Layers {
		d := hp.HeadDimOf(il)
		if r := float64(hp.QKScale()) * math.Sqrt(float64(d)); r > ratio {
			ratio, hd = r, d
		}
	}
	return ratio, hd
}

// Progress is the forward batches run so far and in all.
func (p *Probe) Progress() (done, total int) {
	per := (len(p.prompt) + p.o.Batch - 1) / p.o.Batch
	return p.run*per + (p.pos+p.o.Batch-1)/p.o.Batch, len(p.runs) * per
}

// Result is the choice once Step has said done, else nil.
func (p *Probe) Result() *Choice {
	if !p.done {
		return nil
	}
	return p.c
}

// Close frees the state of a run in progress.
func (p *Probe) Close() {
	if p.st != nil {
		p.st.Close()
		p.st = nil
	}
}

// Step runs the next forward batch; done is true once every run is
// measured and the choice made. After an error the probe is closed.
func (p *Probe) Step() (done bool, err error) {
	if p.done {
		return true, nil
	}
	start := time.Now()
	defer func() { p.c.Elapsed += time.Since(start) }()
	if err := p.step(); err != nil {
		p.Close()
		if p.run == 0 {
			return false, fmt.Errorf("kv choice (f16): %w", err)
		}
		return false, fmt.Errorf("kv choice (%s): %w", p.cands[p.run-1].Label(), err)
	}
	return p.done, nil
}

func (p *Probe) step() error {
	if p.st == nil {
		cfg := p.runs[p.run]
		cfg.Ctx = len(p.prompt) + 1
		st, err := p.m.NewState(cfg, min(p.o.Batch, len(p.prompt)))
		if err != nil {
			return err
		}
		p.st, p.hits, p.maxAbs = st, 0, 0
	}
	end := min(len(p.prompt), p.pos+p.o.Batch)
	if err := p.st.ForwardAll(p.prompt[p.pos:end], p.pos, p.row); err != nil {
		return err
	}
	p.pos = end
	if p.pos < len(p.prompt) {
		return nil
	}
	p.Close()
	if p.run > 0 {
		cand := p.cands[p.run-1]
		// As compareRuns measures it.
		cand.Quality = Quality{Top1Agreement: float64(p.hits) / float64(len(p.prompt)), MaxAbsDLogit: p.maxAbs,
			Cosine: numeric.Cosine(p.last, p.base[len(p.base)-1])}
		cand.Passed = cand.Quality.Top1Agreement >= p.o.MinTop1 && cand.Quality.Cosine >= p.o.MinCosine
		if p.c.ScaleRatio > p.o.MaxScaleRatio && cand.Type == kv.Q4 && !cand.Rotate {
			cand.Skipped = fmt.Sprintf("attention scale %.2f× the usual 1/sqrt(%d)", p.c.ScaleRatio, p.headDim)
		}
		p.c.Candidates = append(p.c.Candidates, cand)
	}
	p.run, p.pos = p.run+1, 0
	if p.run == len(p.runs) {
		p.choose()
		p.base, p.last, p.done = nil, nil, true
	}
	return nil
}

// row takes the logits of prompt position p.pos+i: kept for the f16 run,
// compared with f16's for a candidate.
func (p *Probe) row(i int, l []float32) {
	if p.run == 0 {
		p.base = append(p.base, slices.Clone(l))
		return
	}
	b := p.base[p.pos+i]
	if sample.Greedy(l) == sample.Greedy(b) {
		p.hits++
	}
	for j, v := range l {
		p.maxAbs = max(p.maxAbs, math.Abs(float64(v-b[j])))
	}
	if p.pos+i == len(p.prompt)-1 {
		p.last = append(p.last[:0], l...)
	}
}

// choose picks the first eligible candidate that passed, else q8, and says why.
func (p *Probe) choose() {
	c, o := p.c, p.o
	picked := -1
	for i, cand := range c.Candidates {
		if cand.Passed && cand.Skipped == "" && !cand.Info {
			picked = i
			break
		}
	}
	bar := fmt.Sprintf("top-1 ≥ %.0f%% and cosine ≥ %g", 100*o.MinTop1, o.MinCosine)
	first, q8 := c.Candidates[0], 1
	switch {
	case picked == 0:
		c.Reason = fmt.Sprintf("%s, the default q4, keeps %s against f16", first.Label(), bar)
	case picked > 0 && first.Skipped != "":
		c.Reason = fmt.Sprintf("%s makes q·k errors matter more, so not plain q4; %s keeps %s", first.Skipped, c.Candidates[picked].Label(), bar)
	case picked > 0:
		c.Reason = fmt.Sprintf("%s falls to top-1 %.1f%%, cosine %.5f; %s keeps %s",
			first.Label(), 100*first.Quality.Top1Agreement, first.Quality.Cosine, c.Candidates[picked].Label(), bar)
	default:
		// q8 is the most precise quantized mode; f16 would double the
		// memory, which the settings offer explicitly.
		picked = q8
		c.Reason = fmt.Sprintf("no quantized mode keeps %s; q8 is the closest", bar)
	}
	c.Type, c.Rotate = c.Candidates[picked].Type, c.Candidates[picked].Rotate
}
