package service

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"nibble/app/history"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/reasoning"
	"nibble/engine/scheduler"
)

// chatPart runs the replies: it sends a request to the loaded model or the
// chosen remote one, streams its events to the window, stops it on
// request, and keeps every turn in the history (history.go).
type chatPart struct {
	env
	engine localEngine
	remote remoteTarget
	docs   docPlanner
	// noteProblem shows a problem in Status.Error (a turn not kept).
	noteProblem func(msg string)

	hist    *history.Store // nil when it could not be opened
	histErr error

	mu      sync.Mutex // guards reqs, nextID and closed
	reqs    map[string]context.CancelFunc
	nextID  uint64
	closed  bool
	streams sync.WaitGroup // reply goroutines, waited for by Close
}

// remoteTarget is the remote part as the chat sees it.
type remoteTarget interface {
	// active is the endpoint chats go to, if one is chosen.
	active() (settings.RemoteEndpoint, bool)
	submit(ctx context.Context, ep settings.RemoteEndpoint, r scheduler.Request) (<-chan scheduler.Event, error)
	contextOf(ep settings.RemoteEndpoint) int
}

// docPlanner is the documents part as the chat sees it.
type docPlanner interface {
	withDocuments(req SendRequest) (SendRequest, *docPlan, error)
	// keptDocuments is what the history keeps of attached documents;
	// restore attaches kept ones again.
	keptDocuments(ids []string) ([]history.Document, error)
	restore(kept []history.Document) []DocumentInfo
}

// running is how many replies are running or waiting.
func (c *chatPart) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// historyProblem says why conversations are not kept ("" when they are).
func (c *chatPart) historyProblem() string {
	if c.histErr == nil {
		return ""
	}
	return "conversations are not being kept: " + c.histErr.Error()
}

// close refuses new replies and ends the running ones; each is kept in
// the history with what had streamed.
func (c *chatPart) close() {
	c.mu.Lock()
	c.closed = true
	for _, cancel := range c.reqs {
		cancel()
	}
	c.mu.Unlock()
}

// wait waits for the replies' goroutines to end.
func (c *chatPart) wait() { c.streams.Wait() }

// closeHistory closes the history once no reply is left to store.
func (c *chatPart) closeHistory() error {
	if c.hist == nil {
		return nil
	}
	return c.hist.Close()
}

// send starts a reply to req and returns its id and conversation at once;
// the reply streams as EventProgress and EventDelta events and ends with
// one EventFinal, all carrying the id. Errors that stop it from starting
// (no model, empty, too long for the context) are returned here instead.
//
// The turn is kept in the history: the user's message is written before
// the reply starts (in a new conversation when req.ConversationID is 0),
// and the reply when it ends, so a crash loses at most the reply being
// generated. Replies that end in an error are not kept.
func (c *chatPart) send(req SendRequest) (SendResult, error) {
	if req.ReplaceLast {
		if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != "user" {
			return SendResult{}, errors.New("replacing the last exchange needs the question as the last message")
		}
	}
	var docs *docPlan
	if len(req.Documents) > 0 {
		var err error
		if req, docs, err = c.docs.withDocuments(req); err != nil {
			return SendResult{}, err
		}
	}
	r, err := c.request(req)
	if err != nil {
		return SendResult{}, err
	}
	if req.ReplaceLast {
		// A new draw: the settings' fixed seed would give a regenerated
		// reply the old one's words again (unless sampling is greedy).
		r.Params.Sample.Seed = rand.Uint64()
	}
	if !c.hasModel() { // before anything is kept
		return SendResult{}, scheduler.ErrNoModel
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return SendResult{}, scheduler.ErrClosed
	}
	c.nextID++
	id := "r" + strconv.FormatUint(c.nextID, 10)
	c.reqs[id] = cancel
	c.streams.Add(1)
	c.mu.Unlock()
	// A replacing turn is kept once its reply has started, so that a
	// refused one leaves the exchange it would replace.
	var turn turn
	if !req.ReplaceLast {
		turn = c.recordTurn(req)
	}
	events, err := c.start(ctx, &r)
	if err != nil {
		c.streams.Done()
		c.forget(id)
		c.dropTurn(turn)
		return SendResult{}, err
	}
	if req.ReplaceLast {
		turn = c.replaceTurn(req)
	}
	c.keepDocuments(turn, req.Documents)
	if docs != nil {
		turn.sources = docs.sources
	}
	c.statusChanged()
	limit := r.Params.MaxTokens
	go func() {
		defer c.streams.Done()
		c.stream(id, turn, limit, events)
	}()
	res := SendResult{ReplyID: id, ConversationID: turn.convID}
	if docs != nil {
		res.Sources, res.Documents = docs.sources, docs.uses
	}
	return res, nil
}

func (c *chatPart) request(req SendRequest) (scheduler.Request, error) {
	var r scheduler.Request
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return r, fmt.Errorf("message role %q: want system, user or assistant", m.Role)
		}
		r.Messages = append(r.Messages, chat.Message{Role: m.Role, Content: m.Content})
	}
	r.Prompt = req.Prompt
	empty := len(r.Messages) == 0 && strings.TrimSpace(r.Prompt) == ""
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && strings.TrimSpace(r.Messages[n-1].Content) == "" {
		empty = true
	}
	if empty {
		return r, errors.New("nothing to send: the message is empty")
	}
	if req.MaxTokens < NoReplyLimit {
		return r, fmt.Errorf("reply limit %d: want %d (no limit), 0 (the settings' limit) or a number of tokens", req.MaxTokens, NoReplyLimit)
	}
	if err := c.thinking(req.Thinking, &r); err != nil {
		return r, err
	}
	cfg := c.store.Get()
	if cfg.SystemPrompt != "" && len(r.Messages) > 0 && r.Messages[0].Role != "system" {
		r.Messages = append([]chat.Message{{Role: "system", Content: cfg.SystemPrompt}}, r.Messages...)
	}
	r.Params.Sample = cfg.Sampling.Params()
	r.Params.MaxTokens = replyLimit(req.MaxTokens, cfg.MaxReplyTokens)
	isDemo := c.engine.isDemo()
	// The cap is the demo model's: a remote model in use ends its turns.
	if _, onRemote := c.remote.active(); isDemo && !onRemote && (r.Params.MaxTokens <= 0 || r.Params.MaxTokens > DemoMaxTokens) {
		r.Params.MaxTokens = DemoMaxTokens
	}
	return r, nil
}

// thinking puts the chat's reasoning switch (SendRequest.Thinking) on r as
// the local model's template takes it; a remote model, or a template
// without a switch, is left alone.
func (c *chatPart) thinking(choice string, r *scheduler.Request) error {
	if choice != "" && choice != ThinkingOff && !reasoning.ValidEffort(choice) {
		return fmt.Errorf("thinking %q: want off, %s, or nothing for the model's default", choice, strings.Join(reasoning.Efforts, ", "))
	}
	if _, onRemote := c.remote.active(); onRemote || choice == "" {
		return nil
	}
	info, ok := c.engine.engine().Info()
	if !ok {
		return nil
	}
	switch info.ThinkingControl {
	case reasoning.EnableThinking.String():
		if choice == ThinkingOff {
			off := false
			r.EnableThinking = &off
		}
	case reasoning.ReasoningEffort.String():
		if choice == ThinkingOff {
			choice = reasoning.Efforts[0]
		}
		r.ReasoningEffort = choice
	}
	return nil
}

// ThinkingOff is the SendRequest.Thinking that turns thinking off.
const ThinkingOff = "off"

// replyLimit is the engine's MaxTokens (0: none) for a request that asks
// for asked (SendRequest.MaxTokens) under the settings' limit.
func replyLimit(asked, setting int) int {
	switch {
	case asked > 0:
		return asked
	case asked == NoReplyLimit:
		return 0
	default:
		return setting
	}
}

// hasModel says whether a chat has somewhere to go: a remote model is
// chosen, or a local one is loaded.
func (c *chatPart) hasModel() bool {
	if _, ok := c.remote.active(); ok {
		return true
	}
	_, ok := c.engine.engine().Info()
	return ok
}

// submit starts r on the chosen remote model, else on the local
// scheduler. Either way the reply arrives as scheduler events.
func (c *chatPart) submit(ctx context.Context, r scheduler.Request) (<-chan scheduler.Event, error) {
	if ep, ok := c.remote.active(); ok {
		return c.remote.submit(ctx, ep, r)
	}
	return c.engine.engine().Submit(ctx, r)
}

// start submits r (c.submit). A reply limit past the room the prompt
// leaves is dropped, since the context's end comes first and the reply may
// run to it: the local scheduler says so exactly (ErrContextFull), while a
// remote model's room is estimated before asking, as an endpoint refuses
// such a request too.
func (c *chatPart) start(ctx context.Context, r *scheduler.Request) (<-chan scheduler.Event, error) {
	if _, onRemote := c.remote.active(); onRemote && r.Params.MaxTokens > 0 {
		if n, budget, err := c.promptTokens(*r); err == nil && n+r.Params.MaxTokens > budget {
			r.Params.MaxTokens = 0
		}
	}
	events, err := c.submit(ctx, *r)
	if errors.Is(err, engine.ErrContextFull) && r.Params.MaxTokens > 0 {
		r.Params.MaxTokens = 0
		events, err = c.submit(ctx, *r)
	}
	return events, err
}

// promptTokens counts r as the model chats go to would see it: with the
// local model's tokenizer and chat template, or approximately for a
// remote model. budget is the context to fit it in.
func (c *chatPart) promptTokens(r scheduler.Request) (n, budget int, err error) {
	if ep, ok := c.remote.active(); ok {
		for _, m := range remoteMessages(r) {
			n += approxTokens(m.Content) + 4 // the role's markup
		}
		return n, c.remote.contextOf(ep), nil
	}
	sched := c.engine.engine()
	info, ok := sched.Info()
	if !ok {
		return 0, 0, scheduler.ErrNoModel
	}
	ids, err := sched.Tokenize(r)
	return len(ids), info.Options.Ctx, err
}

// stream forwards one request's events until its channel closes, and
// ends the reply with its final event (finish). A stream the scheduler
// closed without one (a cancelled reply whose reader was slow) ends as
// cancelled, with what had streamed.
func (c *chatPart) stream(id string, turn turn, limit int, events <-chan scheduler.Event) {
	defer c.forget(id)
	var shown streamed // what the window has been sent
	final := false
	for ev := range events {
		switch ev.Kind {
		case scheduler.Delta:
			if ev.Text != "" || ev.Reasoning != "" {
				shown.add(ev.Text, ev.Reasoning, time.Now())
				c.emit(EventDelta, Delta{ID: id, Text: ev.Text, Reasoning: ev.Reasoning})
			}
		case scheduler.Progress:
			c.emit(EventProgress, Progress{ID: id, Prefilled: ev.Prefilled, PromptTokens: ev.PromptTokens})
		case scheduler.Final:
			final = true
			c.finish(id, turn, limit, ev.Result, &shown)
		}
	}
	if !final {
		c.finish(id, turn, limit, nil, &shown)
	}
}

// streamed is what a reply has sent to the window, and when its thinking
// began and ended.
type streamed struct {
	text, reasoning      strings.Builder
	thinkStart, thinkEnd time.Time
}

func (s *streamed) add(text, reasoning string, now time.Time) {
	if reasoning != "" && s.thinkStart.IsZero() {
		s.thinkStart = now
	}
	if text != "" && !s.thinkStart.IsZero() && s.thinkEnd.IsZero() {
		s.thinkEnd = now
	}
	s.text.WriteString(text)
	s.reasoning.WriteString(reasoning)
}

// thinking is how long the model thought: from its first reasoning to its
// first answer text, or to now when it never answered.
func (s *streamed) thinking(now time.Time) time.Duration {
	switch {
	case s.thinkStart.IsZero():
		return 0
	case s.thinkEnd.IsZero():
		return now.Sub(s.thinkStart)
	}
	return s.thinkEnd.Sub(s.thinkStart)
}

// finish ends reply id: its final event (finalOf, from the result, or a
// cancellation when there is none, with the reply limit it ran under) is
// kept in the history before it goes out.
func (c *chatPart) finish(id string, turn turn, limit int, r *scheduler.Result, shown *streamed) {
	f := finalOf(id, r, shown.text.String())
	if r == nil {
		f.Reasoning = shown.reasoning.String()
	}
	f.ThinkingMs = millis(shown.thinking(time.Now()))
	f.MaxTokens = limit
	c.recordReply(turn, f, shown)
	c.forget(id) // before the event, so Status in its handler is not busy
	c.emit(EventFinal, f)
}

func (c *chatPart) forget(id string) {
	c.mu.Lock()
	cancel, ok := c.reqs[id]
	delete(c.reqs, id)
	c.mu.Unlock()
	if ok {
		cancel()
		c.statusChanged()
	}
}

// stop cancels the reply id; its stream ends with a "cancelled" final
// event. Stopping a reply that has ended already does nothing.
func (c *chatPart) stop(id string) {
	c.mu.Lock()
	cancel := c.reqs[id]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
