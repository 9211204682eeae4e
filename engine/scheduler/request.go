package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/estimate"
	"nibble/engine/reasoning"
)

// Request is one chat or completion.
type Request struct {
	// Messages make a chat request, rendered with the model's template;
	// their content is always plain text, never control tokens.
	Messages []chat.Message
	// Prompt is a plain completion, used when Messages is empty.
	Prompt string
	// Params: sampling (seed included), stop strings, max tokens.
	Params engine.GenParams
	// EnableThinking and ReasoningEffort go to the chat template as
	// enable_thinking and reasoning_effort when set (ModelInfo.ThinkingControl
	// says which one the template reads).
	EnableThinking  *bool
	ReasoningEffort string
}

// EventKind says what an Event carries.
type EventKind uint8

const (
	// Delta is streamed text (valid UTF-8), with the token that ended it.
	Delta EventKind = iota
	// Progress reports prefill: Prefilled of PromptTokens are in the cache.
	Progress
	// Final is the last event of every request.
	Final
)

// Event is one item of a request's stream.
type Event struct {
	Kind EventKind
	// Text is answer text; Reasoning is the model's thinking, split from it
	// (ModelInfo.Reasoning names the format). A Delta may carry either or
	// both, or neither while a marker is still being read.
	Text         string
	Reasoning    string
	Token        int32 // Delta: the sampled token, or -1
	Prefilled    int   // Progress
	PromptTokens int   // Progress
	Result       *Result
}

// Result ends a request: the generation's engine.Stats (empty when the
// request never ran) and what the scheduler adds.
type Result struct {
	// Text (in Stats) is the answer alone and Reasoning the thinking, when
	// the model's chat template marks its reasoning; Stats.Tokens are all
	// the generated tokens, thinking included.
	Reasoning string
	// FinishReason is the coarse reason (engine.StopReason.Finish): stop
	// (end of turn or a stop string), length (max tokens or the context
	// budget), cancelled or error, also for a request that never ran.
	FinishReason engine.StopReason
	Err          error // why, for cancelled and error
	engine.Stats
	// CachedTokens is what the slot's cache holds at the end: after a
	// cancellation, the prompt tokens processed so far, which a later
	// request with the same prefix reuses.
	CachedTokens     int
	Slot             int
	QueueWait        time.Duration
	TimeToFirstToken time.Duration // from Submit, queue wait included
	// PrefillTokPerSec and DecodeTokPerSec are the throughputs: Stats'
	// rates for a local generation, a remote server's for a remote one.
	PrefillTokPerSec float64
	DecodeTokPerSec  float64
}

// request is a submitted Request on its way through the scheduler.
type request struct {
	ctx       context.Context
	stopWatch func() bool
	ids       []int32
	params    engine.GenParams
	model     *loaded
	split     reasoning.Splitter // nil for a plain completion
	answer    strings.Builder
	thinking  strings.Builder
	submitted time.Time
	started   time.Time
	box       *mailbox
}

// Submit tokenizes the request and queues it. Its stream of events ends
// with one Final event, then the channel closes. Read until it closes, or
// cancel ctx: after a cancellation, text not yet read may be dropped, and a
// reader that has not taken the Final event within a few seconds gets the
// channel closed without it (treat that as cancelled).
func (s *Scheduler) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	s.mu.Lock()
	l, closing := s.loaded, s.closing
	s.mu.Unlock()
	switch {
	case closing:
		return nil, ErrClosed
	case l == nil:
		return nil, ErrNoModel
	}
	ids, split, err := s.encodeBounded(ctx, l, r)
	if err != nil {
		return nil, err
	}
	p := r.Params
	p.Continuation = len(r.Messages) == 0
	// Compared without adding: MaxTokens may be as large as math.MaxInt.
	if max(p.MaxTokens, 1) > l.opts.Ctx-len(ids) && p.KeepOnOverflow <= 0 {
		return nil, fmt.Errorf("%w: the prompt has %d tokens and %d more were asked for, but the context budget is %d; raise the context budget or shorten the input",
			engine.ErrContextFull, len(ids), max(p.MaxTokens, 1), l.opts.Ctx)
	}
	req := &request{ctx: ctx, ids: ids, params: p, model: l, split: split, submitted: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return nil, ErrClosed
	case len(s.queue) >= s.cfg.QueueLimit+(s.cfg.Slots-s.running):
		// Requests about to take a free slot are in the queue too: count
		// only those that will have to wait.
		return nil, ErrBusy
	}
	// Both are set before the owner can see the request.
	req.box = newMailbox(ctx, s.quit)
	req.stopWatch = context.AfterFunc(ctx, s.nudge)
	s.queue = append(s.queue, req)
	s.lastPrompt = ids
	s.nudge()
	return req.box.out, nil
}

// Tokenize returns the prompt tokens r would run with on the loaded model
// (to count them, e.g. to fit a conversation or a document).
func (s *Scheduler) Tokenize(r Request) ([]int32, error) {
	l := s.current()
	if l == nil {
		return nil, ErrNoModel
	}
	ids, _, err := l.encode(r, nil)
	return ids, err
}

// encode tokenizes r, and for a chat returns the splitter of its reply's
// reasoning, which starts where the rendered prompt leaves off.
// check, when set, sees the text's length before it is tokenized (the
// rendered prompt of a chat).
func (l *loaded) encode(r Request, check func(textBytes int) error) ([]int32, reasoning.Splitter, error) {
	if len(r.Messages) > 0 {
		p := l.m.Prompt()
		if check != nil {
			p.CheckText = func(text string) error { return check(len(text)) }
		}
		p.Template = l.template.Load()
		p.EnableThinking, p.ReasoningEffort = r.EnableThinking, r.ReasoningEffort
		ids, text, err := p.EncodeRendered(r.Messages)
		if err != nil {
			return nil, nil, fmt.Errorf("chat template: %w", err)
		}
		f := reasoningFormat(p.Template, l.m.HP.Arch)
		if f == reasoning.None {
			return ids, nil, nil
		}
		return ids, reasoning.New(f, text), nil
	}
	if r.Prompt == "" {
		return nil, nil, errors.New("empty prompt")
	}
	if check != nil {
		if err := check(len(r.Prompt)); err != nil {
			return nil, nil, err
		}
	}
	return l.m.EncodePrompt(r.Prompt), nil, nil
}

// reasoningFormat is how replies rendered with t mark their reasoning. A
// plain completion template ("none") marks nothing.
func reasoningFormat(t *chat.Template, arch string) reasoning.Format {
	if t == chat.None() {
		return reasoning.None
	}
	return reasoning.Detect(t.Source(), arch)
}

// delta turns a piece of generated text into a Delta event, the reasoning
// split from the answer.
func (r *request) delta(text string, token int32) Event {
	e := Event{Kind: Delta, Text: text, Token: token}
	if r.split != nil {
		p := r.split.Push(text)
		e.Text, e.Reasoning = p.Content, p.Reasoning
	}
	r.answer.WriteString(e.Text)
	r.thinking.WriteString(e.Reasoning)
	return e
}

// admit drops cancelled waiting requests and places waiting requests on
// free slots, in arrival order. Only the owner removes from the queue, so
// the head stays the head while the lock is released to allocate a session.
func (s *Scheduler) admit() {
	s.mu.Lock()
	kept := s.queue[:0]
	for _, r := range s.queue {
		if err := r.ctx.Err(); err != nil {
			r.finish(Result{FinishReason: engine.StopCancelled, Err: err, QueueWait: time.Since(r.submitted)})
			continue
		}
		kept = append(kept, r)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		r := s.queue[0]
		s.mu.Unlock()
		started := false
		if r.model != s.loaded { // tokenized for a model that is gone
			r.finish(Result{FinishReason: engine.StopCancelled, Err: ErrUnloaded, QueueWait: time.Since(r.submitted)})
		} else {
			sl := s.pick(r.ids)
			if sl == nil {
				return // the head waits, and so does everyone behind it
			}
			started = s.start(sl, r)
		}
		// Leaving the queue and counting as running in one step: Submit
		// must never see the request in neither (or both) places, or it
		// counts a free slot wrongly and answers ErrBusy.
		s.mu.Lock()
		if started {
			s.running++
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
	}
}

// pick chooses the slot for a prompt, keeping other conversations' caches
// warm where memory allows: the free slot with the longest reusable cached
// prefix; else a free slot whose cache is empty; else a new session when
// one more fits comfortably in the memory budget; else the least recently
// used free slot, its cache dropped; else nil (wait).
func (s *Scheduler) pick(ids []int32) *slot {
	var best, empty, lru, unborn *slot
	bestLen := 0
	for _, sl := range s.slots {
		switch {
		case sl.req != nil:
		case sl.sess == nil:
			if unborn == nil {
				unborn = sl
			}
		default:
			if n := sl.sess.CommonPrefix(ids); n >= s.cfg.MinReuse && n > bestLen {
				best, bestLen = sl, n
			}
			if len(sl.sess.Tokens()) == 0 && empty == nil {
				empty = sl
			}
			if lru == nil || sl.lastUsed < lru.lastUsed {
				lru = sl
			}
		}
	}
	switch {
	case best != nil:
		return best
	case empty != nil:
		return empty
	case unborn != nil && s.growSession(unborn):
		return unborn
	case lru != nil:
		lru.sess.Reset()
		return lru
	}
	return nil
}

// growSession allocates a session for sl if one more session beside those
// allocated keeps the estimate within the "fits" part of the budget (the
// weights and runtime count once, the KV cache and scratch per session): a
// second slot is a convenience, never a reason to make the Mac swap.
func (s *Scheduler) growSession(sl *slot) bool {
	l := s.loaded
	perSession := l.est.KV + l.est.Scratch
	need := l.est.Total + int64(l.sessions)*perSession
	if l.budget.Bytes > 0 && float64(need) > estimate.TightFraction*float64(l.budget.Bytes) {
		return false
	}
	sess, err := engine.NewSession(l.m, s.b, l.opts)
	if err != nil {
		return false
	}
	sl.sess = sess
	l.sessions++
	return true
}

// start begins r on sl and reports whether it runs (admit counts it).
func (s *Scheduler) start(sl *slot, r *request) bool {
	r.started = time.Now()
	s.clock++
	sl.lastUsed = s.clock
	g, err := sl.sess.Begin(r.ids, r.params)
	if err != nil {
		r.finish(Result{FinishReason: engine.StopError, Err: err, Slot: sl.id, QueueWait: r.started.Sub(r.submitted), CachedTokens: len(sl.sess.Tokens())})
		return false
	}
	sl.req, sl.gen = r, g
	return true
}

// step advances sl's request by one prefill batch or one token.
func (s *Scheduler) step(sl *slot) {
	r, g := sl.req, sl.gen
	ev, err := g.Step(r.ctx)
	switch {
	case err != nil && r.ctx.Err() != nil:
		s.finish(sl, engine.StopCancelled, r.ctx.Err())
		return
	case err != nil:
		s.finish(sl, engine.StopError, err)
		return
	case ev.Prefilled > 0:
		r.box.put(Event{Kind: Progress, Prefilled: ev.Prefilled, PromptTokens: g.PromptLen()})
	case ev.Token >= 0 || ev.Text != "":
		r.box.put(r.delta(ev.Text, ev.Token))
	}
	if g.Done() {
		s.finish(sl, "", nil)
	}
}

// finish ends sl's request; reason "" takes it from the generation.
func (s *Scheduler) finish(sl *slot, reason engine.StopReason, err error) {
	r, g := sl.req, sl.gen
	sl.req, sl.gen = nil, nil
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	st := g.Stats()
	if reason == "" {
		reason = st.StopReason.Finish()
	}
	res := Result{FinishReason: reason, Err: err, Stats: *st,
		CachedTokens: len(sl.sess.Tokens()), Slot: sl.id, QueueWait: r.started.Sub(r.submitted),
		PrefillTokPerSec: st.PrefillTokPerSec(), DecodeTokPerSec: st.DecodeTokPerSec()}
	if st.GenTokens > 0 {
		res.TimeToFirstToken = r.started.Sub(r.submitted) + st.FirstToken
	}
	r.finish(res)
}

func (r *request) finish(res Result) {
	if r.stopWatch != nil {
		r.stopWatch()
	}
	if r.split != nil {
		p := r.split.Flush()
		if p.Content != "" || p.Reasoning != "" {
			r.answer.WriteString(p.Content)
			r.thinking.WriteString(p.Reasoning)
			r.box.put(Event{Kind: Delta, Text: p.Content, Reasoning: p.Reasoning, Token: -1})
		}
		res.Text, res.Reasoning = r.answer.String(), r.thinking.String()
	}
	r.box.put(Event{Kind: Final, Token: -1, Result: &res})
	r.box.close()
}

// mailbox decouples the owner goroutine from a slow reader: events queue
// without bound (a reply's worth of text) and a pump goroutine hands them
// to the reader, so one stalled client never stalls the other slots.
type mailbox struct {
	mu       sync.Mutex
	items    []Event
	closed   bool
	ready    chan struct{}
	out      chan Event
	ctx      context.Context
	shutdown <-chan struct{} // the scheduler has stopped: stop waiting for a reader
}

func newMailbox(ctx context.Context, shutdown <-chan struct{}) *mailbox {
	m := &mailbox{ready: make(chan struct{}, 1), out: make(chan Event), ctx: ctx, shutdown: shutdown}
	go m.pump()
	return m
}

func (m *mailbox) put(e Event) {
	m.mu.Lock()
	m.items = append(m.items, e)
	m.mu.Unlock()
	m.signal()
}

func (m *mailbox) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.signal()
}

func (m *mailbox) signal() {
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// finalGrace is how long the Final event of a cancelled request waits for
// a reader that may have gone away.
const finalGrace = 2 * time.Second

func (m *mailbox) pump() {
	defer close(m.out)
	for {
		m.mu.Lock()
		items, closed := m.items, m.closed
		m.items = nil
		m.mu.Unlock()
		for _, e := range items {
			if !m.deliver(e) {
				if !closed {
					m.drainUntilClosed()
				}
				return
			}
		}
		if closed {
			return
		}
		<-m.ready
	}
}

// deliver hands e to the reader; false when the reader is gone.
func (m *mailbox) deliver(e Event) bool {
	select {
	case m.out <- e:
		return true
	default:
	}
	select {
	case m.out <- e:
		return true
	case <-m.shutdown:
		return false
	case <-m.ctx.Done():
		if e.Kind != Final {
			return true // dropped: the reader cancelled
		}
		t := time.NewTimer(finalGrace)
		defer t.Stop()
		select {
		case m.out <- e:
		case <-t.C:
		case <-m.shutdown:
		}
		return false
	}
}

// drainUntilClosed waits for the owner to close the mailbox, discarding.
func (m *mailbox) drainUntilClosed() {
	for {
		m.mu.Lock()
		closed := m.closed
		m.items = nil
		m.mu.Unlock()
		if closed {
			return
		}
		<-m.ready
	}
}
