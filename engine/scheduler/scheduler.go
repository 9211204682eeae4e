// Package scheduler owns the loaded model, the backend and a small pool of
// sessions ("slots"), and runs requests from the app, the CLI and the local
// server on them. One goroutine, the owner, does all model and backend work,
// so no session or backend is ever used by two goroutines at once; requests
// on different slots advance in turns of one prefill batch or one token,
// which is what lets two replies stream side by side.
//
// A request goes to the free slot whose cache shares the longest prefix with
// its prompt (as llama.cpp's server slots and Ollama's input cache do), so a
// follow-up question about the same conversation or document prefills only
// its new tokens. Requests beyond the slots wait in order, up to a limit.
package scheduler

import (
	"errors"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/chat"
	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/reasoning"
)

// Config sizes a scheduler. Zero values take the defaults.
type Config struct {
	// Slots is how many requests run at once (default 2). Only the first
	// slot's session is allocated at load; the others are allocated when
	// requests overlap and the estimator says one more session fits.
	Slots int
	// QueueLimit is how many requests may wait for a slot (default 16);
	// beyond it Submit fails with ErrBusy.
	QueueLimit int
	// MinReuse is the shortest cached prefix worth reusing (default 32
	// tokens). Below it a request starts from an empty cache: a few shared
	// template tokens save nothing, and a cold start gives the same output
	// as the request run alone.
	MinReuse int
	// Tokenizers is how many requests may be tokenized at once (default
	// 2); Submit waits for a free one.
	Tokenizers int
	// NewBackend makes the backend (default: the CPU backend on Threads).
	NewBackend func() backend.Backend
	Threads    int
}

func (c Config) withDefaults() Config {
	if c.Slots <= 0 {
		c.Slots = 2
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 16
	}
	if c.Tokenizers <= 0 {
		c.Tokenizers = 2
	}
	if c.MinReuse <= 0 {
		c.MinReuse = 32
	}
	if c.NewBackend == nil {
		threads := c.Threads
		c.NewBackend = func() backend.Backend { return cpu.New(threads) }
	}
	return c
}

var (
	// ErrBusy: every slot is taken and the queue is full.
	ErrBusy = errors.New("busy: too many requests are waiting; try again when a reply has finished")
	// ErrNoModel: no model is loaded.
	ErrNoModel = errors.New("no model is loaded")
	// ErrUnloaded ends requests whose model was unloaded or reconfigured.
	ErrUnloaded = errors.New("the model was unloaded")
	// ErrClosed: the scheduler was closed.
	ErrClosed = errors.New("the engine has shut down")
)

// Scheduler runs requests on the loaded model. Its methods are safe for
// concurrent use.
type Scheduler struct {
	cfg        Config
	tokenizers *tokenGate    // bounds concurrent tokenization (tokenize.go)
	ops        chan func()   // work for the owner goroutine
	wake       chan struct{} // something was queued or cancelled
	quit       chan struct{}
	done       chan struct{}
	close      sync.Once

	mu      sync.Mutex
	queue   []*request // waiting, in arrival order
	running int        // slots with a request (the owner updates it)
	loaded  *loaded    // read by Submit for tokenizing; written by the owner
	closing bool
	// templates are the chat templates chosen for model files instead of
	// their own (SetTemplate), by cleaned path.
	templates map[string]*chat.Template
	// lastPrompt is the prompt of the last request submitted (LastPrompt).
	lastPrompt []int32

	// Owned by the owner goroutine.
	b      backend.Backend
	slots  []*slot
	clock  uint64
	cursor int        // round-robin position
	idle   []*idleJob // background work, run while no request runs (background.go)
}

// loaded is the model and the settings it was loaded with.
type loaded struct {
	m *engine.Model
	// template is the chat template requests are rendered with: the
	// model's own, or the one SetTemplate chose for its file. It changes
	// while the model stays loaded, so it is read atomically.
	template atomic.Pointer[chat.Template]
	opts     engine.Options // with defaults applied
	est      *estimate.Estimate
	budget   estimate.Budget
	info     ModelInfo
	sessions int // sessions allocated
	// maxPieceBytes is maxTokenBytes(m), computed on first use.
	maxPieceOnce  sync.Once
	maxPieceBytes int
}

type slot struct {
	id       int
	sess     *engine.Session // nil until first used
	req      *request
	gen      *engine.Generation
	lastUsed uint64
}

// New starts a scheduler with no model loaded.
func New(cfg Config) *Scheduler {
	cfg = cfg.withDefaults()
	s := &Scheduler{cfg: cfg, ops: make(chan func()), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}), b: cfg.NewBackend(), tokenizers: newTokenGate(cfg.Tokenizers)}
	for i := range cfg.Slots {
		s.slots = append(s.slots, &slot{id: i})
	}
	go s.run()
	return s
}

// Close ends every request, unloads the model and releases the backend.
func (s *Scheduler) Close() error {
	var err error
	s.close.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		err = s.do(func() error { return s.unload(ErrClosed) })
		close(s.quit)
		<-s.done
		if cerr := s.b.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// isClosing is true once Close has begun: loads that were waiting to run
// must not install a model Close has already unloaded.
func (s *Scheduler) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// do runs f on the owner goroutine and waits for it.
func (s *Scheduler) do(f func() error) error {
	res := make(chan error, 1)
	select {
	case s.ops <- func() { res <- f() }:
		return <-res
	case <-s.done:
		return ErrClosed
	}
}

func (s *Scheduler) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the owner goroutine.
func (s *Scheduler) run() {
	defer close(s.done)
	for {
		s.admit()
		if !s.busy() && len(s.idle) > 0 {
			select {
			case op := <-s.ops:
				op()
			case <-s.wake:
			case <-s.quit:
				return
			default:
				s.stepIdle()
			}
			continue
		}
		if !s.busy() {
			select {
			case op := <-s.ops:
				op()
			case <-s.wake:
			case <-s.quit:
				return
			}
			continue
		}
		// Between units of work, serve waiting operations without blocking.
		select {
		case op := <-s.ops:
			op()
			continue
		case <-s.wake:
		default:
		}
		s.stepOne()
	}
}

func (s *Scheduler) busy() bool {
	for _, sl := range s.slots {
		if sl.req != nil {
			return true
		}
	}
	return false
}

// stepOne advances the next active slot, in turn, by one unit.
func (s *Scheduler) stepOne() {
	for range s.slots {
		sl := s.slots[s.cursor]
		s.cursor = (s.cursor + 1) % len(s.slots)
		if sl.req != nil {
			s.step(sl)
			return
		}
	}
}

// ModelInfo describes the loaded model for the app and the server.
type ModelInfo struct {
	Name     string
	Path     string
	Arch     string
	Backend  string
	CtxTrain int
	Options  engine.Options // context, batch and KV settings in force
	Slots    int
	// Template is the chat template in use: "gguf" for the file's own, a
	// built-in one's name, or the Name of the template SetTemplate chose
	// ("custom", "none"). TemplateProblem says why the file's own is not
	// used when neither it nor a chosen one is ("" when it is).
	Template        string
	TemplateProblem string
	// Reasoning is how the template marks the model's thinking ("think",
	// "harmony"; "" for none), which requests' events split from the
	// answer; ThinkingControl is the template variable that turns it down
	// or off ("enable_thinking", "reasoning_effort"; "" for none).
	Reasoning       string
	ThinkingControl string
	Estimate        estimate.Estimate // one session's memory breakdown
}

// Info describes the loaded model; ok is false when none is loaded.
func (s *Scheduler) Info() (info ModelInfo, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded == nil {
		return ModelInfo{}, false
	}
	return s.loaded.info, true
}

// AllocatedBytes is what the backend has allocated now (caches and
// activations; the mapped weights are not counted).
func (s *Scheduler) AllocatedBytes() int64 {
	var n int64
	if err := s.do(func() error { n = s.b.AllocatedBytes(); return nil }); err != nil {
		return 0
	}
	return n
}

// Load maps the model at path and allocates its first session, after the
// memory estimator has said it fits (a *estimate.NotFitError otherwise,
// with nothing allocated). A model already loaded is unloaded first, ending
// its requests with ErrUnloaded.
func (s *Scheduler) Load(path string, o engine.Options) (ModelInfo, error) {
	var info ModelInfo
	err := s.do(func() error {
		if s.isClosing() {
			return ErrClosed
		}
		if err := s.unload(ErrUnloaded); err != nil {
			return err
		}
		m, err := engine.LoadModel(path, s.b)
		if err != nil {
			return err
		}
		info, err = s.install(m, o)
		if err != nil {
			m.Close()
		}
		return err
	})
	return info, err
}

// Reconfigure changes the context budget or KV settings of the loaded model
// without mapping it again. Running requests end with ErrUnloaded. When the
// new settings do not fit, the old ones stay in force.
func (s *Scheduler) Reconfigure(o engine.Options) (ModelInfo, error) {
	var info ModelInfo
	err := s.do(func() error {
		var err error
		info, err = s.reconfigure(o)
		return err
	})
	return info, err
}

// reconfigure is Reconfigure on the owner goroutine.
func (s *Scheduler) reconfigure(o engine.Options) (ModelInfo, error) {
	l := s.current()
	switch {
	case s.isClosing():
		return ModelInfo{}, ErrClosed
	case l == nil:
		return ModelInfo{}, ErrNoModel
	}
	// Check before giving anything up.
	if _, _, err := engine.Estimate(l.m, s.b, o); err != nil {
		return ModelInfo{}, err
	}
	s.endAll(ErrUnloaded)
	s.closeSessions()
	info, err := s.install(l.m, o)
	if err != nil { // the memory went elsewhere meanwhile: keep the model usable
		var err2 error
		if info, err2 = s.install(l.m, l.opts); err2 != nil {
			s.unload(ErrUnloaded)
		}
	}
	return info, err
}

// Unload ends every request with ErrUnloaded, gives the backend memory back
// and unmaps the model.
func (s *Scheduler) Unload() error {
	return s.do(func() error { return s.unload(ErrUnloaded) })
}

func (s *Scheduler) current() *loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// install creates the first session of m under o and publishes the model.
func (s *Scheduler) install(m *engine.Model, o engine.Options) (ModelInfo, error) {
	est, budget, err := engine.Estimate(m, s.b, o)
	if err != nil {
		return ModelInfo{}, err
	}
	sess, err := engine.NewSession(m, s.b, o)
	if err != nil {
		return ModelInfo{}, err
	}
	for _, sl := range s.slots {
		sl.sess, sl.req, sl.gen, sl.lastUsed = nil, nil, nil, 0
	}
	s.slots[0].sess = sess
	l := &loaded{m: m, opts: sess.Opts, est: est, budget: budget, sessions: 1}
	l.info = ModelInfo{Name: m.Name(), Path: m.Path, Arch: m.HP.Arch, Backend: s.b.Name(), CtxTrain: m.HP.CtxTrain,
		Options: sess.Opts, Slots: s.cfg.Slots, Estimate: *est}
	s.mu.Lock()
	l.useTemplate(s.templates[filepath.Clean(m.Path)])
	s.loaded = l
	info := l.info
	s.mu.Unlock()
	return info, nil
}

// useTemplate makes t the template of l's requests (nil: the model's
// own) and says so in l.info. The caller holds s.mu, or owns l alone.
func (l *loaded) useTemplate(t *chat.Template) {
	l.info.TemplateProblem = ""
	if t == nil {
		t = l.m.Template
		if l.m.TemplateProblem != nil {
			l.info.TemplateProblem = l.m.TemplateProblem.Error()
		}
	}
	l.template.Store(t)
	l.info.Template = t.Name()
	l.info.Reasoning, l.info.ThinkingControl = "", ""
	if f := reasoningFormat(t, l.m.HP.Arch); f != reasoning.None {
		l.info.Reasoning, l.info.ThinkingControl = f.String(), reasoning.ControlOf(t.Source()).String()
	}
}

// SetTemplate chooses the chat template of the model file at path instead
// of its own (t nil: its own again). It applies to the file's later loads
// and, when the file is loaded now, to the requests submitted from now on,
// without reloading anything: a slot's cache keeps whatever prefix the new
// prompts still share with it. It reports whether the file is loaded.
func (s *Scheduler) SetTemplate(path string, t *chat.Template) (loaded bool) {
	path = filepath.Clean(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == nil {
		delete(s.templates, path)
	} else {
		if s.templates == nil {
			s.templates = map[string]*chat.Template{}
		}
		s.templates[path] = t
	}
	if s.loaded == nil || filepath.Clean(s.loaded.m.Path) != path {
		return false
	}
	s.loaded.useTemplate(t)
	return true
}

// LastPrompt is the prompt (token ids) of the last request Submit
// accepted, or nil: what the model was given, for diagnostics and tests.
func (s *Scheduler) LastPrompt() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.lastPrompt...)
}

func (s *Scheduler) unload(reason error) error {
	l := s.current()
	s.endIdle(reason)
	if l == nil {
		s.failQueue(reason)
		return nil
	}
	s.endAll(reason)
	s.failQueue(reason)
	err := s.closeSessions()
	s.mu.Lock()
	s.loaded = nil
	s.mu.Unlock()
	if cerr := l.m.Close(); err == nil {
		err = cerr
	}
	// A menu-bar app should hand a model's memory back to the Mac at once,
	// not when the garbage collector next gets round to it.
	debug.FreeOSMemory()
	return err
}

func (s *Scheduler) closeSessions() error {
	var err error
	for _, sl := range s.slots {
		if sl.sess != nil {
			if cerr := sl.sess.Close(); err == nil {
				err = cerr
			}
			sl.sess = nil
		}
	}
	return err
}

// endAll finishes the running requests with reason.
func (s *Scheduler) endAll(reason error) {
	for _, sl := range s.slots {
		if sl.req != nil {
			s.finish(sl, engine.StopCancelled, reason)
		}
	}
}

func (s *Scheduler) failQueue(reason error) {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, r := range q {
		r.finish(Result{FinishReason: engine.StopCancelled, Err: reason, QueueWait: time.Since(r.submitted)})
	}
}
