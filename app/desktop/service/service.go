// Package service is the app's side of the engine: it loads the model the
// settings name (or the demo model on a first run), runs chat requests on
// the engine scheduler and reports their streams as events, keeps the
// conversations, lists and checks local models, estimates memory, and
// downloads catalog models. The Wails-bound
// methods in app/desktop are thin wrappers around it, and it has no Wails
// or cgo dependency, so it is tested like any other package.
package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"nibble/app/backends"
	"nibble/app/desktop/demo"
	"nibble/app/history"
	"nibble/app/settings"
	"nibble/engine/chat"
	"nibble/engine/estimate"
	"nibble/engine/scheduler"
)

// Event names, with the payload type each carries.
const (
	EventStatus   = "model:status"   // Status
	EventDelta    = "chat:delta"     // Delta
	EventProgress = "chat:progress"  // Progress
	EventFinal    = "chat:final"     // Final
	EventPrepare  = "model:progress" // Prepare
	// EventModels: the list of local models changed (the models folder,
	// an added or forgotten file, a finished download, which one is
	// loaded).
	EventModels   = "models:changed"    // []LocalModel
	EventDownload = "download:progress" // Download
	EventHistory  = "history:changed"   // HistoryChanged
)

// HistoryChanged says which conversation was created, appended to or
// deleted (event history:changed).
type HistoryChanged struct {
	ID int64 `json:"id"`
}

// Emitter delivers an event to the frontend (runtime.EventsEmit in the app).
// It must not block for long: it is called from the goroutines that read
// the engine's streams.
type Emitter func(name string, data any)

// DemoMaxTokens caps replies of the demo model: its random weights seldom
// end a turn by themselves.
const DemoMaxTokens = 160

// HistoryFile is the conversations' database inside the data folder.
const HistoryFile = "history.db"

// Service runs the app's chats, model picker, downloads and history. Its
// methods are safe for concurrent use.
type Service struct {
	store *settings.Store
	dirs  settings.Dirs
	emit  Emitter
	// statusSeq numbers the statuses Status returns (Status.Seq).
	statusSeq atomic.Uint64
	// probe reads the machine's memory budget (tests pin it).
	probe func() (estimate.Budget, error)

	// loadMu serializes loads, reconfigurations and scheduler swaps.
	loadMu sync.Mutex

	mu       sync.Mutex
	sched    *scheduler.Scheduler
	schedCfg scheduler.Config
	state    State
	err      string
	prepare  *Prepare
	demo     bool
	reqs     map[string]context.CancelFunc
	nextID   uint64
	closed   bool
	kvc      *kvCheckState // the loaded model's KV check (kvcheck.go)
	// settingsWarning is what was wrong with settings.json at start.
	settingsWarning string

	streams sync.WaitGroup // reply goroutines, waited for by Close

	hist    *history.Store // nil when it could not be opened
	histErr error

	models modelWatch
	cat    catalogState

	docs docStore // attached documents (documents.go)

	closeOnce sync.Once
	closeErr  error

	choiceMu sync.Mutex      // guards choice, set when a scheduler makes its backend
	choice   backends.Choice // the engine's backend and why (engineBackend)

	// What remote servers said about their models (remote.go).
	remote remoteState

	// The app's local server and the global hotkey's status (server.go,
	// quickactions.go).
	server appServer
	hotkey hotkeyState
}

// New makes a service on store's settings, with dirs for the demo model's
// cache, the models folder and the history database, which it opens now
// (if that fails, Status says so and chat works without history). Nothing
// is loaded until Start or LoadModel. Close releases it all.
func New(store *settings.Store, dirs settings.Dirs, emit Emitter) *Service {
	if emit == nil {
		emit = func(string, any) {}
	}
	c := store.Get()
	s := &Service{store: store, dirs: dirs, emit: emit, probe: estimate.SystemBudget,
		state: StateStarting, reqs: map[string]context.CancelFunc{}}
	cfg := scheduler.Config{Slots: c.Slots, Threads: c.Threads, NewBackend: s.engineBackend(c.Threads)}
	s.sched, s.schedCfg = scheduler.New(cfg), cfg
	s.hist, s.histErr = history.Open(filepath.Join(dirs.Data, HistoryFile))
	s.initCatalog()
	s.startWatch()
	return s
}

// SetSettingsWarning records what was wrong with settings.json when it was
// opened (settings.Open's error), for Diagnostics.
func (s *Service) SetSettingsWarning(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	s.settingsWarning = err.Error()
	s.mu.Unlock()
}

// engine is the scheduler in use (a load may replace it when the settings'
// slots or threads changed).
func (s *Service) engine() *scheduler.Scheduler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sched
}

// Close stops the downloads (their parts are kept for a resume), ends
// every reply (each is kept in the history with what had streamed), and
// shuts the engine and the history down. Later calls return the first
// call's result.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for _, cancel := range s.reqs {
			cancel()
		}
		s.mu.Unlock()
		s.stopKVCheck()
		s.stopWatch()
		s.stopServer()
		s.closeRemoteClients()
		s.closeDownloads()
		s.loadMu.Lock() // a load in progress finishes first
		err := s.engine().Close()
		s.loadMu.Unlock()
		// The streams end once the scheduler has closed them; each stores
		// its reply before it returns.
		done := make(chan struct{})
		go func() { s.streams.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, errors.New("a reply was still being saved after 10 s"))
		}
		if s.hist != nil {
			err = errors.Join(err, s.hist.Close())
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Start loads the model of the settings (with the settings' context and
// KV type, refused like LoadModel when it will not fit), or on a first run
// (no model configured) synthesizes the demo model into the cache folder
// and loads that. It reports through EventPrepare and EventStatus and
// returns what went wrong (also kept in Status).
func (s *Service) Start() error {
	s.applyServer() // answers 503 until the model is in
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
	_, err := s.LoadModel(LoadRequest{Path: path, keepRemote: true})
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

func (s *Service) setState(st State, msg string) {
	s.mu.Lock()
	s.state, s.err = st, msg
	s.mu.Unlock()
	s.emit(EventStatus, s.Status())
}

// Status describes the engine now. Error is the last start or load
// failure, else why the history is not kept (chat works regardless).
func (s *Service) Status() Status {
	s.mu.Lock()
	st := Status{State: s.state, Error: s.err, Running: len(s.reqs), Prepare: s.prepare}
	isDemo := s.demo
	s.mu.Unlock()
	st.Busy = st.Running > 0
	if st.Error == "" && s.histErr != nil {
		st.Error = "conversations are not being kept: " + s.histErr.Error()
	}
	if info, ok := s.engine().Info(); ok {
		m := modelOf(info)
		m.Demo = isDemo
		m.KVCheck = s.kvCheckFor(info.Path)
		st.Model = &m
	}
	if ep, ok := s.activeRemote(); ok {
		m := s.remoteModelInfo(ep)
		st.Remote = &m
		if st.State == StateStarting || st.State == StateError {
			st.State = StateReady // chats have somewhere to go
		}
	}
	// Numbered once everything is read, so a status read after a change
	// (and any status event about it) outnumbers those read before it.
	st.Seq = s.statusSeq.Add(1)
	return st
}

// Send starts a reply to req and returns its id and conversation at once;
// the reply streams as EventProgress and EventDelta events and ends with
// one EventFinal, all carrying the id. Errors that stop it from starting
// (no model, empty, too long for the context) are returned here instead.
//
// The turn is kept in the history: the user's message is written before
// the reply starts (in a new conversation when req.ConversationID is 0),
// and the reply when it ends, so a crash loses at most the reply being
// generated. Replies that end in an error are not kept.
func (s *Service) Send(req SendRequest) (SendResult, error) {
	var docs *docPlan
	if len(req.Documents) > 0 {
		var err error
		if req, docs, err = s.withDocuments(req); err != nil {
			return SendResult{}, err
		}
	}
	r, err := s.request(req)
	if err != nil {
		return SendResult{}, err
	}
	if !s.hasModel() { // before anything is kept
		return SendResult{}, scheduler.ErrNoModel
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
	s.streams.Add(1)
	s.mu.Unlock()
	turn := s.recordTurn(req)
	if docs != nil {
		turn.sources = docs.sources
	}
	events, err := s.submit(ctx, r) // the local scheduler or the remote model
	if err != nil {
		s.streams.Done()
		s.forget(id)
		s.dropTurn(turn)
		return SendResult{}, err
	}
	s.emit(EventStatus, s.Status())
	go func() {
		defer s.streams.Done()
		s.stream(id, turn, events)
	}()
	res := SendResult{ReplyID: id, ConversationID: turn.convID}
	if docs != nil {
		res.Sources, res.Documents = docs.sources, docs.uses
	}
	return res, nil
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
	empty := len(r.Messages) == 0 && strings.TrimSpace(r.Prompt) == ""
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" && strings.TrimSpace(r.Messages[n-1].Content) == "" {
		empty = true
	}
	if empty {
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
	// The cap is the demo model's: a remote model in use ends its turns.
	if _, onRemote := s.activeRemote(); isDemo && !onRemote && (r.Params.MaxTokens <= 0 || r.Params.MaxTokens > DemoMaxTokens) {
		r.Params.MaxTokens = DemoMaxTokens
	}
	return r, nil
}

// stream forwards one request's events until its channel closes, and
// keeps the reply in the history before its final event goes out.
func (s *Service) stream(id string, turn turn, events <-chan scheduler.Event) {
	defer s.forget(id)
	var shown strings.Builder // what the window has been sent
	final := false
	for ev := range events {
		switch ev.Kind {
		case scheduler.Delta:
			if ev.Text != "" {
				shown.WriteString(ev.Text)
				s.emit(EventDelta, Delta{ID: id, Text: ev.Text})
			}
		case scheduler.Progress:
			s.emit(EventProgress, Progress{ID: id, Prefilled: ev.Prefilled, PromptTokens: ev.PromptTokens})
		case scheduler.Final:
			final = true
			f := finalOf(id, ev.Result)
			s.recordReply(turn, f, shown.String())
			s.forget(id) // before the event, so Status in its handler is not busy
			s.emit(EventFinal, f)
		}
	}
	if !final { // the scheduler closes a cancelled stream whose reader was slow
		f := Final{ID: id, FinishReason: "cancelled", Text: shown.String()}
		s.recordReply(turn, f, shown.String())
		s.forget(id)
		s.emit(EventFinal, f)
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
