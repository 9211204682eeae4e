// Package service is the app's side of the engine: it loads the model the
// settings name (or the demo model on a first run), runs chat requests on
// the engine scheduler and reports their streams as events. The Wails-bound
// methods in app/desktop are thin wrappers around it, and it has no Wails
// or cgo dependency, so it is tested like any other package.
package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/kv"
	"nibble/engine/scheduler"
)

// Event names, with the payload type each carries.
const (
	EventStatus   = "model:status"   // Status
	EventDelta    = "chat:delta"     // Delta
	EventProgress = "chat:progress"  // Progress
	EventFinal    = "chat:final"     // Final
	EventPrepare  = "model:progress" // Prepare
)

// Emitter delivers an event to the frontend (runtime.EventsEmit in the app).
// It must not block for long: it is called from the goroutines that read
// the engine's streams.
type Emitter func(name string, data any)

// DemoMaxTokens caps replies of the demo model: its random weights seldom
// end a turn by themselves.
const DemoMaxTokens = 160

// Service runs the app's chats. Its methods are safe for concurrent use.
type Service struct {
	sched *scheduler.Scheduler
	store *settings.Store
	dirs  settings.Dirs
	emit  Emitter

	mu      sync.Mutex
	state   State
	err     string
	prepare *Prepare
	demo    bool
	reqs    map[string]context.CancelFunc
	nextID  uint64
	closed  bool
}

// New makes a service on store's settings, with dirs for the demo model's
// cache. Nothing is loaded until Start or LoadModel.
func New(store *settings.Store, dirs settings.Dirs, emit Emitter) *Service {
	if emit == nil {
		emit = func(string, any) {}
	}
	s := store.Get()
	sched := scheduler.New(scheduler.Config{Slots: s.Slots, Threads: s.Threads})
	return &Service{sched: sched, store: store, dirs: dirs, emit: emit, state: StateStarting,
		reqs: map[string]context.CancelFunc{}}
}

// Close cancels every request and shuts the engine down.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, cancel := range s.reqs {
		cancel()
	}
	s.mu.Unlock()
	return s.sched.Close()
}

// Start loads the model of the settings, or on a first run (no model
// configured) synthesizes the demo model into the cache folder and loads
// that. It reports through EventPrepare and EventStatus and returns what
// went wrong (also kept in Status).
func (s *Service) Start() error {
	path := s.store.Get().LastModel
	if path == "" {
		var err error
		s.setState(StatePreparing, "")
		path, err = demo.Ensure(s.dirs.Cache, s.prepareProgress("Synthesizing the demo model"))
		if err != nil {
			s.setState(StateError, err.Error())
			return err
		}
	}
	_, err := s.load(path)
	return err
}

// prepareProgress reports synthesis progress, once per percent.
func (s *Service) prepareProgress(label string) func(done, total int64) {
	last := -1
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		pct := int(done * 100 / total)
		if pct == last {
			return
		}
		last = pct
		p := Prepare{Label: label, Done: done, Total: total}
		s.mu.Lock()
		s.prepare = &p
		s.mu.Unlock()
		s.emit(EventPrepare, p)
	}
}

// LoadModel loads the GGUF at path (replacing the loaded model, whose
// replies end) and remembers it in the settings.
func (s *Service) LoadModel(path string) (Status, error) {
	if path == "" {
		return s.Status(), errors.New("load model: no path given")
	}
	st, err := s.load(path)
	if err != nil {
		return st, err
	}
	if !demo.Is(s.dirs.Cache, path) {
		if err := s.store.Update(func(c *settings.Settings) error { c.LastModel = path; return nil }); err != nil {
			return st, fmt.Errorf("model loaded, but not remembered: %w", err)
		}
	}
	return st, nil
}

func (s *Service) load(path string) (Status, error) {
	s.setState(StateLoading, "")
	opts, err := loadOptions(s.store.Get())
	if err == nil {
		_, err = s.sched.Load(path, opts)
	}
	if err != nil {
		err = fmt.Errorf("loading %s: %w", path, err)
		s.setState(StateError, err.Error())
		return s.Status(), err
	}
	s.mu.Lock()
	s.demo = demo.Is(s.dirs.Cache, path)
	s.prepare = nil
	s.mu.Unlock()
	s.setState(StateReady, "")
	return s.Status(), nil
}

// loadOptions are the engine options the settings ask for. KV type "auto"
// is q4, the compact cache Nibble is built around (docs/ARCHITECTURE.md,
// "KV cache format").
func loadOptions(c settings.Settings) (engine.Options, error) {
	name := c.KVType
	if name == "" || name == "auto" {
		name = "q4"
	}
	t, err := kv.ParseType(name)
	if err != nil {
		return engine.Options{}, fmt.Errorf("settings kv_type: %w", err)
	}
	return engine.Options{Ctx: c.ContextTokens, KV: t}, nil
}

func (s *Service) setState(st State, msg string) {
	s.mu.Lock()
	s.state, s.err = st, msg
	s.mu.Unlock()
	s.emit(EventStatus, s.Status())
}

// Status describes the engine now.
func (s *Service) Status() Status {
	s.mu.Lock()
	st := Status{State: s.state, Error: s.err, Running: len(s.reqs), Prepare: s.prepare}
	isDemo := s.demo
	s.mu.Unlock()
	st.Busy = st.Running > 0
	if info, ok := s.sched.Info(); ok {
		m := modelOf(info)
		m.Demo = isDemo
		st.Model = &m
	}
	return st
}

// Send starts a reply to req and returns its id at once; the reply streams
// as EventProgress and EventDelta events and ends with one EventFinal, all
// carrying the id. Errors that stop it from starting (no model, empty,
// too long for the context) are returned here instead.
func (s *Service) Send(req SendRequest) (SendResult, error) {
	r, err := s.request(req)
	if err != nil {
		return SendResult{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return SendResult{}, scheduler.ErrClosed
	}
	s.nextID++
	id := "r" + strconv.FormatUint(s.nextID, 10)
	s.reqs[id] = cancel
	s.mu.Unlock()
	events, err := s.sched.Submit(ctx, r)
	if err != nil {
		s.forget(id)
		return SendResult{}, err
	}
	s.emit(EventStatus, s.Status())
	go s.stream(id, events)
	return SendResult{ReplyID: id}, nil
}

func (s *Service) request(req SendRequest) (scheduler.Request, error) {
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
	if len(r.Messages) == 0 && r.Prompt == "" {
		return r, errors.New("nothing to send: the message is empty")
	}
	c := s.store.Get()
	if c.SystemPrompt != "" && len(r.Messages) > 0 && r.Messages[0].Role != "system" {
		r.Messages = append([]chat.Message{{Role: "system", Content: c.SystemPrompt}}, r.Messages...)
	}
	r.Params.Sample = c.Sampling.Params()
	r.Params.MaxTokens = req.MaxTokens
	s.mu.Lock()
	isDemo := s.demo
	s.mu.Unlock()
	if isDemo && (r.Params.MaxTokens <= 0 || r.Params.MaxTokens > DemoMaxTokens) {
		r.Params.MaxTokens = DemoMaxTokens
	}
	return r, nil
}

// stream forwards one request's events until its channel closes.
func (s *Service) stream(id string, events <-chan scheduler.Event) {
	defer s.forget(id)
	final := false
	for ev := range events {
		switch ev.Kind {
		case scheduler.Delta:
			if ev.Text != "" {
				s.emit(EventDelta, Delta{ID: id, Text: ev.Text})
			}
		case scheduler.Progress:
			s.emit(EventProgress, Progress{ID: id, Prefilled: ev.Prefilled, PromptTokens: ev.PromptTokens})
		case scheduler.Final:
			final = true
			s.forget(id) // before the event, so Status in its handler is not busy
			s.emit(EventFinal, finalOf(id, ev.Result))
		}
	}
	if !final { // the scheduler closes a cancelled stream whose reader was slow
		s.forget(id)
		s.emit(EventFinal, Final{ID: id, FinishReason: "cancelled"})
	}
}

func (s *Service) forget(id string) {
	s.mu.Lock()
	cancel, ok := s.reqs[id]
	delete(s.reqs, id)
	s.mu.Unlock()
	if ok {
		cancel()
		s.emit(EventStatus, s.Status())
	}
}

// Stop cancels the reply id; its stream ends with a "cancelled" final
// event. Stopping a reply that has ended already does nothing.
func (s *Service) Stop(id string) {
	s.mu.Lock()
	cancel := s.reqs[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
