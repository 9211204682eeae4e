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
}

// LoadModel maps a GGUF and builds its tokenizer and chat template. It does
// not allocate the KV cache or activations (NewSession does, after the
// memory check).
func LoadModel(path string) (*Model, error) {
	m, err := model.Open(path)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(m.File)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("load %s: tokenizer: %w", path, err)
	}
	src, _ := m.File.String("tokenizer.chat_template")
	tmpl, err := chat.ForModel(src, m.HP.Arch, func(s string) bool { _, ok := tok.TokenID(s); return ok })
	if err != nil {
		// A broken template must not stop plain completion: fall back.
		tmpl = chat.Fallback(m.HP.Arch)
	}
	return &Model{Model: m, Tok: tok, Template: tmpl}, nil
}

// Options size a session.
type Options struct {
	Ctx     int     // context budget in tokens (0: min(trained context, 4096))
	Batch   int     // prefill batch (0: 512)
	KV      kv.Type // cache type
	KVGroup int     // q4/q8 group size (0: 32)
	// KVRotate stores K rotated (DESIGN.md §2 rotation option): an outlier
	// channel no longer sets the scale of its whole group.
	KVRotate bool
	// KVNoSmooth turns off channel smoothing of quantized K (DESIGN.md §2
	// per-channel λ, calibrated on the prompt), which is on by default.
	KVNoSmooth bool
	// Budget is the memory the session may use; nil probes the system.
	// The session refuses, before allocating, a configuration that will not fit.
	Budget *estimate.Budget
}

func (o Options) withDefaults(hp model.HParams) Options {
	o.Ctx, o.Batch, o.KVGroup = model.SessionSizes(hp, o.Ctx, o.Batch, o.KVGroup)
	return o
}

// KVConfig is the cache these options give model hp.
func (o Options) KVConfig(hp model.HParams) kv.Config {
	o = o.withDefaults(hp)
	return kv.Config{Type: o.KV, GroupSize: o.KVGroup, Layers: hp.Layers, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Ctx: o.Ctx, Rotate: o.KVRotate, Smooth: !o.KVNoSmooth}
}

// Session is one conversation: a KV cache that persists across calls, so a
// prompt that extends the previous one only prefills its new tokens.
type Session struct {
	M      *Model
	B      backend.Backend
	State  *model.State
	Opts   Options
	tokens []int32 // exactly the tokens whose K/V are in the cache
	logits []float32
	// PrefillProgress, when set, is called after each prefill batch with the
	// prompt tokens processed so far (reused ones included) and the total.
	PrefillProgress func(done, total int)
}

// NewSession checks the configuration against the memory budget, then
// allocates the cache and activations on b. A configuration that will not
// fit returns *estimate.NotFitError (with advice) and allocates nothing.
func NewSession(m *Model, b backend.Backend, o Options) (*Session, error) {
	o = o.withDefaults(m.HP)
	if err := checkFits(m, b, o); err != nil {
		return nil, err
	}
	st, err := m.NewState(b, o.KVConfig(m.HP), o.Batch)
	if err != nil {
		return nil, err
	}
	return &Session{M: m, B: b, State: st, Opts: o, logits: make([]float32, m.HP.Vocab)}, nil
}

// Tokens is the sequence currently held in the cache.
func (s *Session) Tokens() []int32 { return s.tokens }

// Reset forgets the cached sequence.
func (s *Session) Reset() { s.tokens = s.tokens[:0] }

// Truncate keeps the first n cached tokens (to regenerate from there); the
// cache slots after them are overwritten by later tokens.
func (s *Session) Truncate(n int) {
	if n >= 0 && n < len(s.tokens) {
		s.tokens = s.tokens[:n]
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
	IgnoreEOS bool
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
	StopReason    string // eog, stop, length, context, cancelled
	Prefill       time.Duration
	Decode        time.Duration
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
	common := 0
	for common < len(s.tokens) && common < len(prompt) && s.tokens[common] == prompt[common] {
		common++
	}
	if common == len(prompt) {
		common-- // recompute the last token to get its logits
	}
	s.tokens = s.tokens[:common]
	for pos := common; pos < len(prompt); {
		if err := ctx.Err(); err != nil {
			return common, err
		}
		end := min(len(prompt), pos+s.Opts.Batch)
		if err := s.State.Forward(prompt[pos:end], pos, s.logits); err != nil {
			return common, err
		}
		s.tokens = append(s.tokens, prompt[pos:end]...)
		pos = end
		if s.PrefillProgress != nil {
			s.PrefillProgress(pos, len(prompt))
		}
	}
	return common, nil
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

// fitPrompt applies the overflow policy to a prompt that will be followed
// by up to maxNew generated tokens.
func (s *Session) fitPrompt(prompt []int32, p *GenParams) ([]int32, error) {
	budget := s.Opts.Ctx
	need := len(prompt) + max(p.MaxTokens, 1)
	if need <= budget {
		return prompt, nil
	}
	if p.KeepOnOverflow <= 0 || p.KeepOnOverflow >= budget/2 {
		return nil, fmt.Errorf("%w: the prompt has %d tokens and %d more were asked for, but the context budget is %d; raise the budget (--ctx) or shorten the input",
			ErrContextFull, len(prompt), max(p.MaxTokens, 1), budget)
	}
	// Keep the first tokens (system prompt) and the most recent ones.
	room := budget - max(p.MaxTokens, 1) - p.KeepOnOverflow
	if room <= 0 {
		return nil, fmt.Errorf("%w: %d new tokens leave no room in a context of %d", ErrContextFull, p.MaxTokens, budget)
	}
	out := append([]int32{}, prompt[:p.KeepOnOverflow]...)
	return append(out, prompt[len(prompt)-room:]...), nil
}

// Generate prefills prompt and samples until EOG, a stop string, MaxTokens,
// the context budget or ctx's cancellation. onEvent sees text as it streams.
func (s *Session) Generate(ctx context.Context, prompt []int32, p GenParams, onEvent func(Event) error) (*Stats, error) {
	st := &Stats{PromptTokens: len(prompt)}
	prompt, err := s.fitPrompt(prompt, &p)
	if err != nil {
		return st, err
	}
	t0 := time.Now()
	reused, err := s.Prefill(ctx, prompt)
	st.ReusedTokens, st.PrefillTokens = reused, len(prompt)-reused
	st.Prefill = time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			st.StopReason = "cancelled"
		}
		return st, err
	}
	sampler := sample.New(p.Sample)
	dec := s.M.Tok.NewStreamDecoder()
	stops := newStopMatcher(p.Stop)
	var text strings.Builder
	emit := func(tok int32, piece string) error {
		out := stops.push(piece)
		text.WriteString(out)
		if onEvent != nil && (out != "" || tok >= 0) {
			return onEvent(Event{Token: tok, Text: out})
		}
		return nil
	}
	t1 := time.Now()
	defer func() { st.Decode = time.Since(t1); st.Text = text.String() }()
	for {
		if err := ctx.Err(); err != nil {
			st.StopReason = "cancelled"
			return st, err
		}
		recent := s.tokens[max(0, len(s.tokens)-max(p.Sample.RepeatLastN, 0)):]
		tok := sampler.Sample(s.logits, recent)
		if !p.IgnoreEOS && s.M.Tok.IsEOG(tok) {
			st.StopReason = "eog"
			return st, emit(-1, dec.Flush()+stops.flush())
		}
		st.Tokens = append(st.Tokens, tok)
		st.GenTokens++
		if err := emit(tok, dec.Push(tok)); err != nil {
			return st, err
		}
		if stops.hit {
			st.StopReason = "stop"
			return st, nil
		}
		if p.MaxTokens > 0 && st.GenTokens >= p.MaxTokens {
			st.StopReason = "length"
			return st, emit(-1, dec.Flush()+stops.flush())
		}
		if len(s.tokens) >= s.Opts.Ctx {
			st.StopReason = "context"
			return st, emit(-1, dec.Flush()+stops.flush())
		}
		if err := s.Step(tok); err != nil {
			return st, err
		}
	}
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

// checkFits runs the memory estimator on the model's header and the session
// options.
func checkFits(m *Model, b backend.Backend, o Options) error {
	budget := o.Budget
	if budget == nil {
		sys, err := estimate.SystemBudget()
		if err != nil {
			return fmt.Errorf("memory budget: %w", err)
		}
		budget = &sys
	}
	d, err := estimate.FromGGUF(m.File, filepath.Base(m.Path))
	if err != nil {
		return err
	}
	eo := estimate.Options{Ctx: o.Ctx, KV: o.KV, KVGroup: o.KVGroup, Batch: o.Batch, Backend: b.Name()}
	if t, ok := b.(interface{ Threads() int }); ok {
		eo.Threads = t.Threads()
	}
	_, err = estimate.Check(d, eo, *budget)
	return err
}
