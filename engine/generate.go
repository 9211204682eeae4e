package engine

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"nibble/engine/sample"
	"nibble/engine/tokenizer"
)

// Generation is one prompt's run on a session, advanced one unit at a time:
// a prefill batch or one token. A scheduler interleaves the generations of
// several sessions this way and checks for cancellation between units.
type Generation struct {
	s       *Session
	p       GenParams
	prompt  []int32
	next    int   // next prompt position to prefill
	pending int32 // sampled token not yet fed to the model (-1: none)
	sampler *sample.Sampler
	dec     *tokenizer.StreamDecoder
	stops   *stopMatcher
	banned  []int32 // tokens the sampler must never pick (IgnoreEOS: the EOG ones)
	text    strings.Builder
	begun   time.Time
	decode  time.Time // when the first token was sampled
	done    bool
	stats   Stats
}

// StopReason says why a generation ended. Its text is what the CLI's JSON,
// the logs and (through Finish) the API's finish_reason show.
type StopReason string

const (
	StopEndOfTurn StopReason = "eog"       // the model sampled an end-of-generation token
	StopString    StopReason = "stop"      // a stop string (GenParams.Stop) appeared
	StopMaxTokens StopReason = "length"    // GenParams.MaxTokens were generated
	StopContext   StopReason = "context"   // the context budget is full
	StopCancelled StopReason = "cancelled" // the caller's context was cancelled
	StopError     StopReason = "error"     // a forward pass or the event callback failed
)

// Finish is the coarser reason the OpenAI-style API and the app report:
// stop (end of turn or a stop string), length (max tokens or the context
// budget), cancelled or error.
func (r StopReason) Finish() StopReason {
	switch r {
	case StopEndOfTurn, StopString:
		return StopString
	case StopMaxTokens, StopContext:
		return StopMaxTokens
	}
	return r
}

// StepEvent is what one Step produced.
type StepEvent struct {
	// Prefilled is, after a prefill batch, how many prompt tokens the cache
	// holds now (reused ones included); 0 after a decode step.
	Prefilled int
	// Token is the sampled token, or -1.
	Token int32
	// Text became safe to show (valid UTF-8, stop strings held back).
	Text string
}

// Begin prepares a generation of prompt: it applies the overflow policy and
// finds how much of the prompt the cache already holds. Nothing runs until
// Step.
func (s *Session) Begin(prompt []int32, p GenParams) (*Generation, error) {
	g := &Generation{s: s, p: p, pending: -1, begun: time.Now()}
	g.stats.PromptTokens = len(prompt)
	prompt, err := s.fitPrompt(prompt, &g.p)
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("empty prompt")
	}
	common := s.reuse(prompt)
	g.prompt, g.next = prompt, common
	g.stats.ReusedTokens, g.stats.PrefillTokens = common, len(prompt)-common
	g.sampler = sample.New(p.Sample)
	g.dec = s.M.Tok.NewStreamDecoder()
	if p.Continuation {
		g.dec = s.M.Tok.NewContinuationDecoder()
	}
	if p.IgnoreEOS {
		g.banned = s.M.Tok.EOGTokens()
	}
	g.stops = newStopMatcher(p.Stop)
	return g, nil
}

// CommonPrefix is how many leading tokens of prompt the session can reuse:
// the cached tokens prompt starts with, as far as the cache can go on from
// them (Resumable). A prompt that extends the cached sequence reuses all of
// it, after a sliding-window ring's wrap too; one that leaves it earlier
// reuses none once a ring wrapped there, and no prompt reuses anything
// after eviction. Begin reuses the same, less the prompt's last token when
// the cache holds all of it.
func (s *Session) CommonPrefix(prompt []int32) int {
	return s.exact(s.Resumable(s.sharedPrefix(prompt)))
}

// sharedPrefix is how many leading tokens of prompt equal the cached ones.
func (s *Session) sharedPrefix(prompt []int32) int {
	if s.State.SmoothingStale() {
		return 0 // stored before the model's smoothing was calibrated
	}
	n := 0
	for n < len(s.tokens) && n < len(prompt) && s.tokens[n] == prompt[n] {
		n++
	}
	return n
}

// Done reports whether the generation has ended; Stats says why.
func (g *Generation) Done() bool { return g.done }

// Stats are the counters so far (final once Done).
func (g *Generation) Stats() *Stats {
	st := g.stats
	st.Text = g.text.String()
	return &st
}

// Step runs one unit of work. After an error or cancellation the generation
// is done and the cache holds exactly the tokens processed so far, so a
// later prompt with the same prefix reuses them.
func (g *Generation) Step(ctx context.Context) (StepEvent, error) {
	ev := StepEvent{Token: -1}
	if g.done {
		return ev, fmt.Errorf("generation already ended (%s)", g.stats.StopReason)
	}
	if err := ctx.Err(); err != nil {
		g.finish(StopCancelled)
		return ev, err
	}
	s := g.s
	if g.next < len(g.prompt) {
		t := time.Now()
		next, err := s.prefillBatch(g.prompt, g.next)
		g.stats.Prefill += time.Since(t)
		if err != nil {
			g.finish(StopError)
			return ev, err
		}
		g.next, ev.Prefilled = next, next
		return ev, nil
	}
	if g.pending >= 0 {
		tok := g.pending
		g.pending = -1
		if err := s.Step(tok); err != nil {
			g.finish(StopError)
			return ev, err
		}
	}
	if g.decode.IsZero() {
		g.decode = time.Now()
		g.stats.FirstToken = g.decode.Sub(g.begun)
	}
	defer func() { g.stats.Decode = time.Since(g.decode) }()
	recent := s.tokens[max(0, len(s.tokens)-repeatWindow(g.p.Sample.RepeatLastN, len(s.tokens))):]
	for _, id := range g.banned {
		if int(id) < len(s.logits) {
			s.logits[id] = float32(math.Inf(-1))
		}
	}
	tok := g.sampler.Sample(s.logits, recent)
	if s.M.Tok.IsEOG(tok) {
		ev.Text = g.emit(g.flushText())
		g.finish(StopEndOfTurn)
		return ev, nil
	}
	ev.Token = tok
	g.stats.Tokens = append(g.stats.Tokens, tok)
	g.stats.GenTokens++
	ev.Text = g.emit(g.stops.push(g.dec.Push(tok)))
	switch {
	case g.stops.hit:
		g.finish(StopString)
	case g.p.MaxTokens > 0 && g.stats.GenTokens >= g.p.MaxTokens:
		ev.Text += g.emit(g.flushText())
		g.finish(StopMaxTokens)
	case len(s.tokens)+1 >= s.Opts.Ctx:
		// This token fills the context: the prompt and the reply together
		// never count more tokens than the budget holds.
		ev.Text += g.emit(g.flushText())
		g.finish(StopContext)
	default:
		g.pending = tok
	}
	return ev, nil
}

// flushText ends the text: the decoder's last bytes go through the stop
// matcher after what it holds back, so the order is kept and a stop string
// they complete still stops.
func (g *Generation) flushText() string {
	out := g.stops.push(g.dec.Flush())
	return out + g.stops.flush()
}

// PromptLen is the length of the prompt this generation runs (after the
// overflow policy), which prefill progress counts towards.
func (g *Generation) PromptLen() int { return len(g.prompt) }

func (g *Generation) emit(text string) string {
	g.text.WriteString(text)
	return text
}

func (g *Generation) finish(reason StopReason) {
	g.done = true
	g.stats.StopReason = reason
}

// repeatWindow is how many recent tokens the repetition penalty sees:
// n > 0 the last n, -1 the whole context, 0 none.
func repeatWindow(n, have int) int {
	if n < 0 {
		return have
	}
	return min(n, have)
}

// fitPrompt applies the overflow policy to a prompt that will be followed
// by up to p.MaxTokens generated tokens.
func (s *Session) fitPrompt(prompt []int32, p *GenParams) ([]int32, error) {
	budget := s.Opts.Ctx
	// Compared without adding: MaxTokens may be as large as math.MaxInt.
	if max(p.MaxTokens, 1) <= budget-len(prompt) {
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
	g, err := s.Begin(prompt, p)
	if err != nil {
		return &Stats{PromptTokens: len(prompt)}, err
	}
	for !g.Done() {
		ev, err := g.Step(ctx)
		if err != nil {
			return g.Stats(), err
		}
		if onEvent != nil && (ev.Token >= 0 || ev.Text != "") {
			if err := onEvent(Event{Token: ev.Token, Text: ev.Text}); err != nil {
				g.finish(StopError)
				return g.Stats(), err
			}
		}
	}
	return g.Stats(), nil
}
