// Package engine ties a model, its tokenizer and a backend into sessions
// that generate text. The CLI, the local server and the app share it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"nibble/engine/backend"
	"nibble/engine/chat"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/engine/sample"
	"nibble/engine/tokenizer"
)

// Model is a loaded model with its tokenizer and chat template.
type Model struct {
	*model.Model
	Tok      *tokenizer.Tokenizer
	Template *chat.Template
	// TemplateProblem says why the file's own chat template is not used
	// (nil when it is): the app shows it beside the model.
	TemplateProblem error
}

// Name is the model's general.name, or its file name.
func (m *Model) Name() string {
	if n, ok := m.File.String("general.name"); ok && strings.TrimSpace(n) != "" {
		return n
	}
	return filepath.Base(m.Path)
}

// LoadModel maps a GGUF, makes b's handles to its weights (the model runs
// on b) and builds its tokenizer and chat template. It does not allocate the
// KV cache or activations (NewSession does, after the memory check).
func LoadModel(path string, b backend.Backend) (*Model, error) {
	m, err := model.Open(path, b)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(m.File)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("load %s: tokenizer: %w", path, err)
	}
	src, _ := m.File.String("tokenizer.chat_template")
	// A broken template must not stop the model: ForModelOrFallback picks a
	// built-in one from the vocabulary's special tokens and says why.
	tmpl, problem := chat.ForModelOrFallback(src, m.HP.Arch, func(s string) bool { _, ok := tok.TokenID(s); return ok })
	return &Model{Model: m, Tok: tok, Template: tmpl, TemplateProblem: problem}, nil
}

// Options size a session.
type Options struct {
	Ctx   int // context budget in tokens (0: min(trained context, 4096))
	Batch int // prefill batch (0: 512)
	// ExactReuse reuses a cached prefix only in whole prefill batches
	// written by prefills, so the rest is computed in the batches a cold
	// run uses and a temperature-0 reply is the same, bit for bit, cold or
	// warm (in-batch rows attend in float, cached ones as stored). It
	// recomputes up to Batch-1 prompt tokens and the reply tokens a prompt
	// repeats. A float window of recent positions (KVResidual) is not
	// restored when the cache goes back to a reuse point, so bit-exact
	// replies also need KVResidual < 0.
	ExactReuse bool
	KV         kv.Type // cache type
	KVGroup    int     // q4/q8 group size (0: 32)
	// KVRotate says whether the cache stores K rotated (docs/ARCHITECTURE.md,
	// "Rotation"): an outlier channel no longer sets the scale of its
	// whole group. Auto (the zero value) rotates q4 caches where the backend
	// rotates the model's head dim (backend.KVRotator); on where it does not
	// is refused.
	KVRotate kv.RotateMode
	// KVRotated is KVRotate resolved for the cache type, head dim and
	// backend; NewSession sets it, and it is ignored on input.
	KVRotated bool
	// KVNoSmooth turns off channel smoothing of quantized K (docs/ARCHITECTURE.md,
	// "Channel smoothing": per-channel λ, calibrated on the prompt), which is on by default.
	KVNoSmooth bool
	// KVResidual is the f16 residual window of a quantized cache, in
	// positions (docs/ARCHITECTURE.md, "KV cache format"): 0 gives the
	// type's default (kv.DefaultResidual), a negative value none.
	// NewSession stores the resolved value (negative when none).
	KVResidual int
	// Evict bounds the cache to a token budget (docs/ARCHITECTURE.md,
	// "Eviction (H2O)"): the zero value keeps every position. A Budget
	// above Ctx is Ctx; H2O's zero Sinks and Recent take kv.DefaultEviction's.
	Evict kv.Eviction
	// EvictPercent, when positive, sets Evict.Budget to that percentage of Ctx.
	EvictPercent int
	// Budget is the memory the session may use; nil probes the system.
	// The session refuses, before allocating, a configuration that will not fit.
	Budget *estimate.Budget
}

func (o Options) withDefaults(hp model.HParams) Options {
	o.Ctx, o.Batch, o.KVGroup = model.SessionSizes(hp, o.Ctx, o.Batch, o.KVGroup)
	if o.Evict.Policy != kv.EvictNone {
		if o.EvictPercent > 0 {
			o.Evict.Budget = max(1, o.Ctx*o.EvictPercent/100)
		}
		o.Evict.Budget = min(o.Evict.Budget, o.Ctx)
		if o.Evict.Policy == kv.EvictH2O && o.Evict.Sinks == 0 && o.Evict.Recent == 0 {
			o.Evict = kv.DefaultEviction(kv.EvictH2O, o.Evict.Budget)
		}
		o.Batch = min(o.Batch, o.Evict.MaxBatch())
	}
	return o
}

// KVConfig is the cache these options give model hp; KVResidual and
// KVRotated are taken as resolved (KVResidual 0 or negative: no window), as
// NewSession resolves them.
func (o Options) KVConfig(hp model.HParams) kv.Config {
	o = o.withDefaults(hp)
	return hp.CacheConfig(kv.Config{Type: o.KV, GroupSize: o.KVGroup, Ctx: o.Ctx,
		Rotate: o.KVRotated, Smooth: !o.KVNoSmooth, Residual: max(o.KVResidual, 0), Evict: o.Evict}, false)
}

// KVLabel names the cache a session runs, as its info shows it: "q4 KV
// (rotated)", "q8 KV". It reads KVRotated, so it describes a session's
// resolved options.
func (o Options) KVLabel() string {
	if o.KVRotated {
		return o.KV.String() + " KV (rotated)"
	}
	return o.KV.String() + " KV"
}

// ResolveRotate sets o.KVRotated for model hp on b: the mode's choice for
// the cache type, except that auto does not rotate where b cannot rotate
// the head dim of every layer that stores K/V (a cache rotates all its
// layers or none: Gemma 4's global heads may be too wide where its sliding
// ones are not), and on is refused there.
func (o Options) ResolveRotate(b backend.Backend, hp model.HParams) (Options, error) {
	o.KVRotated = o.KVRotate.Rotates(o.KV)
	for il := 0; o.KVRotated && il < hp.KVLayers(); il++ {
		if d := hp.HeadDimOf(il); !backend.RotatesHeadDim(b, d) {
			if o.KVRotate == kv.RotateOn {
				return o, fmt.Errorf("the %s backend cannot rotate K of head dim %d (layer %d): use KV rotation auto or off", b.Name(), d, il)
			}
			o.KVRotated = false
		}
	}
	return o, nil
}

// residual is the residual window o gives a cache: the type's default
// when o leaves it open.
func (o Options) residual() int {
	switch {
	case o.KVResidual < 0:
		return 0
	case o.KVResidual > 0:
		return o.KVResidual
	}
	return kv.DefaultResidual(o.KV)
}

// resolveResidual fixes o.KVResidual: the window, or -1 for none.
func (o Options) resolveResidual() Options {
	o.KVResidual = o.residual()
	if o.KVResidual == 0 {
		o.KVResidual = -1
	}
	return o
}

// Session is one conversation: a KV cache that persists across calls, so a
// prompt that extends the previous one only prefills its new tokens.
type Session struct {
	M      *Model
	B      backend.Backend
	State  *model.State
	Opts   Options
	tokens []int32 // exactly the tokens whose K/V are in the cache
	// prefilled: the first prefilled tokens (at most len(tokens)) were
	// written by prompt prefills, not by generation (Options.ExactReuse).
	prefilled int
	logits    []float32
}

// NewSession checks the configuration against the memory budget, then
// allocates the cache and activations on b, the backend m was loaded on. A configuration that will not
// fit returns *estimate.NotFitError (with advice) and allocates nothing.
func NewSession(m *Model, b backend.Backend, o Options) (*Session, error) {
	o = o.withDefaults(m.HP).resolveResidual()
	if err := m.CheckBackend(b); err != nil {
		return nil, err
	}
	if o.Evict.Policy != kv.EvictNone && m.HP.Window > 0 {
		return nil, fmt.Errorf("%s: KV eviction is not available for sliding-window attention (window %d)", m.Name(), m.HP.Window)
	}
	o, err := o.ResolveRotate(b, m.HP)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name(), err)
	}
	if err := checkFits(m, b, o); err != nil {
		return nil, err
	}
	st, err := m.NewState(o.KVConfig(m.HP), o.Batch)
	if err != nil {
		return nil, err
	}
	if err := st.Calibrate(m.Tok.Encode(calibrationText, true, false)); err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: calibrating the KV cache's channel smoothing: %w", m.Name(), err)
	}
	return &Session{M: m, B: b, State: st, Opts: o, logits: make([]float32, m.HP.Vocab)}, nil
}

// calibrationText is what a model's K channel smoothing is calibrated on
// (docs/ARCHITECTURE.md, "Channel smoothing"): fixed, so that λ depends on
// the model alone; prose, code and numbers, as prompts hold.
const calibrationText = `The report was filed on 12 March 2024 at 09:45, after the second review.
It describes how the cache stores keys and values, why some channels are much larger than the
others, and what the tests measure: 1,024 positions, 8 layers, 2 heads of 64 dimensions each.
func (c *Cache) Append(layer, pos int, k, v []float32) error {
	if pos < 0 || pos >= c.ctx { return fmt.Errorf("position %d outside [0, %d)", pos, c.ctx) }
	return nil
}
Question: What is the access code for the second door? Answer: 4471-09, then turn left.
Die Zusammenfassung folgt am Ende; le résumé suit à la fin. 東京の天気は晴れです。`

// CheckBackend reports a backend other than the one m's weights were mapped on.
func (m *Model) CheckBackend(b backend.Backend) error {
	if b != m.Backend {
		return fmt.Errorf("%s: the model was loaded on another backend", m.Name())
	}
	return nil
}

// Close gives the session's cache and activations back to the backend.
// The model stays loaded; the session must not be used afterwards.
func (s *Session) Close() error {
	s.tokens = nil
	return s.State.Close()
}

// Tokens is the sequence currently held in the cache.
func (s *Session) Tokens() []int32 { return s.tokens }

// Evicted reports whether the cache lost positions since the sequence
// started: eviction dropped some (Options.Evict; the cache then holds no
// contiguous prefix, and a prompt reuses none of it), or a sliding-window
// ring wrapped (the sequence can still go on at its end, but not from every
// shorter prefix: Resumable says which).
func (s *Session) Evicted() bool { return backend.CacheEvicted(s.State.Cache) }

// Resumable is the longest prefix of the first n cached tokens (n at most
// their count) after which the session can go on: n while the cache holds
// every position; once a sliding-window ring wrapped, n where the ring still
// holds the window before it (the cached sequence's end, or one before it),
// else 0; after eviction 0.
func (s *Session) Resumable(n int) int {
	return backend.CacheResumableFrom(s.State.Cache, min(max(n, 0), len(s.tokens)))
}

// exact is n, or under Options.ExactReuse the longest prefix of it made of
// whole prefill batches (Resumable's answer for a shorter prefix is the
// same or shorter; rings and eviction do not combine with it).
func (s *Session) exact(n int) int {
	if !s.Opts.ExactReuse {
		return n
	}
	n = min(n, s.prefilled, len(s.tokens))
	return n - n%s.Opts.Batch
}

// Reset forgets the cached sequence.
func (s *Session) Reset() { s.tokens = s.tokens[:0] }

// Truncate keeps the first n cached tokens (to regenerate from there), or
// the longest shorter prefix the cache can go on from (Resumable: none after
// an eviction, or a rewind past a sliding-window ring's wrap); the cache
// slots after them are overwritten by later tokens.
func (s *Session) Truncate(n int) {
	if n >= 0 && n < len(s.tokens) {
		s.tokens = s.tokens[:s.Resumable(n)]
	}
}

// ErrContextFull is returned when a prompt plus the requested generation
// does not fit the context budget and the caller did not ask for shifting.
var ErrContextFull = errors.New("context budget reached")

// GenParams control one generation.
type GenParams struct {
	MaxTokens int // 0: until EOG or the context is full
	Sample    sample.Params
	Stop      []string // stop strings (not included in the output)
	// IgnoreEOS bans the end-of-generation tokens: the sampler never picks
	// them, so the text runs to MaxTokens, a stop string or the context's end.
	IgnoreEOS bool
	// Continuation marks text that continues the prompt (a plain
	// completion, not a chat reply): its first piece keeps its leading
	// space, which only the start of a whole text drops.
	Continuation bool
	// KeepOnOverflow, when > 0, lets a prompt longer than the budget keep its
	// first KeepOnOverflow tokens and the most recent ones instead of failing.
	KeepOnOverflow int
}

// Event is one streamed piece of output.
type Event struct {
	Token int32
	Text  string // valid UTF-8, possibly empty while a character is incomplete
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens  int
	ReusedTokens  int // prompt tokens whose K/V were already cached
	PrefillTokens int
	GenTokens     int
	Tokens        []int32 // generated ids
	Text          string
	StopReason    StopReason
	Prefill       time.Duration
	Decode        time.Duration
	// FirstToken is the time from the start of the generation (Begin) to
	// the first sampled token.
	FirstToken time.Duration
}

// PrefillTokPerSec and DecodeTokPerSec are throughputs (0 when unmeasured).
func (st *Stats) PrefillTokPerSec() float64 { return rate(st.PrefillTokens, st.Prefill) }
func (st *Stats) DecodeTokPerSec() float64  { return rate(st.GenTokens-1, st.Decode) }

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Prefill makes the cache hold prompt, reusing the longest common prefix
// with what is cached, and leaves the last prompt token's logits ready. It
// returns how many tokens were reused.
func (s *Session) Prefill(ctx context.Context, prompt []int32) (reused int, err error) {
	if len(prompt) == 0 {
		return 0, errors.New("empty prompt")
	}
	if len(prompt) > s.Opts.Ctx {
		return 0, fmt.Errorf("%w: prompt of %d tokens exceeds the context budget of %d", ErrContextFull, len(prompt), s.Opts.Ctx)
	}
	common := s.reuse(prompt)
	for pos := common; pos < len(prompt); {
		if err := ctx.Err(); err != nil {
			return common, err
		}
		if pos, err = s.prefillBatch(prompt, pos); err != nil {
			return common, err
		}
	}
	return common, nil
}

// reuse keeps the cached prefix prompt shares (all but its last token, whose
// logits are needed again), as far as the cache can go on from it
// (Resumable), and returns its length.
func (s *Session) reuse(prompt []int32) int {
	common := s.sharedPrefix(prompt)
	if common == len(prompt) {
		common--
	}
	common = s.exact(s.Resumable(common))
	s.tokens = s.tokens[:common]
	return common
}

// prefillBatch runs the prompt's next batch from pos and returns the new
// position; the cache then holds prompt[:end].
func (s *Session) prefillBatch(prompt []int32, pos int) (int, error) {
	end := min(len(prompt), pos+s.Opts.Batch)
	if err := s.State.Forward(prompt[pos:end], pos, s.logits); err != nil {
		return pos, err
	}
	s.tokens = append(s.tokens, prompt[pos:end]...)
	if pos <= s.prefilled {
		s.prefilled = end
	}
	return end, nil
}

// Logits are the next-token logits after the last Prefill or Step.
func (s *Session) Logits() []float32 { return s.logits }

// Step feeds one token at the end of the cached sequence.
func (s *Session) Step(tok int32) error {
	if len(s.tokens) >= s.Opts.Ctx {
		return fmt.Errorf("%w: %d tokens", ErrContextFull, s.Opts.Ctx)
	}
	if err := s.State.Forward([]int32{tok}, len(s.tokens), s.logits); err != nil {
		return err
	}
	s.tokens = append(s.tokens, tok)
	return nil
}

// stopMatcher holds back text that might be the start of a stop string.
type stopMatcher struct {
	stops   []string
	pending string
	hit     bool
}

func newStopMatcher(stops []string) *stopMatcher {
	var s []string
	for _, x := range stops {
		if x != "" {
			s = append(s, x)
		}
	}
	return &stopMatcher{stops: s}
}

// push returns the text that is safe to show.
func (m *stopMatcher) push(piece string) string {
	if m.hit {
		return ""
	}
	if len(m.stops) == 0 {
		return piece
	}
	buf := m.pending + piece
	for _, st := range m.stops {
		if i := strings.Index(buf, st); i >= 0 {
			m.hit, m.pending = true, ""
			return buf[:i]
		}
	}
	// Keep the longest suffix that is a prefix of some stop string.
	keep := 0
	for _, st := range m.stops {
		for k := min(len(st)-1, len(buf)); k > keep; k-- {
			if strings.HasSuffix(buf, st[:k]) {
				keep = k
				break
			}
		}
	}
	m.pending = buf[len(buf)-keep:]
	return buf[:len(buf)-keep]
}

func (m *stopMatcher) flush() string {
	if m.hit {
		return ""
	}
	out := m.pending
	m.pending = ""
	return out
}

// Estimate runs the memory estimator on the model's header for options o on
// backend b, against o.Budget or, when nil, the machine's budget probed now.
// A configuration that will not fit returns *estimate.NotFitError.
func Estimate(m *Model, b backend.Backend, o Options) (*estimate.Estimate, estimate.Budget, error) {
	asked := o
	o = o.withDefaults(m.HP)
	var budget estimate.Budget
	if o.Budget != nil {
		budget = *o.Budget
	} else {
		sys, err := estimate.SystemBudget()
		if err != nil {
			return nil, budget, fmt.Errorf("memory budget: %w", err)
		}
		budget = sys
	}
	d, err := estimate.FromGGUF(m.File, filepath.Base(m.Path))
	if err != nil {
		return nil, budget, err
	}
	// The batch and residual window as asked (0: the defaults, which the
	// estimator resolves as the session does), so the advice's other
	// contexts and KV types get their own defaults.
	eo := estimate.Options{Ctx: o.Ctx, KV: o.KV, KVGroup: o.KVGroup, KVResidual: asked.KVResidual, Batch: asked.Batch, Backend: b.Name(), Evict: o.Evict}
	if t, ok := b.(interface{ Threads() int }); ok {
		eo.Threads = t.Threads()
	}
	e, err := estimate.Check(d, eo, budget)
	return e, budget, err
}

// checkFits refuses, before any allocation, options that will not fit.
func checkFits(m *Model, b backend.Backend, o Options) error {
	_, _, err := Estimate(m, b, o)
	return err
}
