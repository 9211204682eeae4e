// Package service is the app's side of the engine: it loads the model the
// settings name (or the demo model on a first run), runs chat requests on
// the engine scheduler and reports their streams as events, keeps the
// conversations, lists and checks local models, estimates memory, and
// downloads catalog models. The Wails-bound
// methods in app/desktop are thin wrappers around it, and it has no Wails
// or cgo dependency, so it is tested like any other package.
//
// Service is made of parts, each with its own state and lock, which
// reach each other through small interfaces (localEngine, modelFiles,
// remoteTarget, ...), never each other's fields:
//
//	machine        machine.go               backend choice, memory budget
//	loader         load.go                  the scheduler, start-up state, load, context, estimate
//	kvChecker      kvcheck.go               the loaded model's KV check and the kept results
//	picker         models.go                local GGUF files, their headers, the folder watch
//	catalogBrowser catalog.go, downloads.go catalog estimates and downloads
//	chatPart       chat.go, history.go      send, stream, stop, the history
//	docStore       documents.go             attached documents and their plan
//	remotes        remote.go                remote endpoints and their clients
//	localServer    server.go                the local OpenAI-compatible server
//	quickActions   quickactions.go          quick actions on the clipboard
//	hotkey         hotkey.go                the global hotkey's status
//	promptTemplates templates.go            each model file's chat template
//
// The exported methods below (this file) are one-line forwards to the
// parts, except those that compose several: New, Start, Status, Close,
// Settings, UpdateSettings and Diagnostics.
package service

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"nibble/app/history"
	"nibble/app/settings"
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

// NoReplyLimit, as SendRequest.MaxTokens, lets a reply run until the
// model ends its turn or the context is full, whatever the settings say.
const NoReplyLimit = -1

// HistoryFile is the conversations' database inside the data folder.
const HistoryFile = "history.db"

// env is what every part shares, fixed once New returns: the settings
// (the store is safe for concurrent use), the folders, the emitter, and
// the service's Status.
type env struct {
	store *settings.Store
	dirs  settings.Dirs
	emit  Emitter
	// currentStatus is the service's Status, composed of every part's.
	currentStatus func() Status
}

// status is the service's Status now.
func (e env) status() Status { return e.currentStatus() }

// statusChanged sends the service's Status (EventStatus).
func (e env) statusChanged() { e.emit(EventStatus, e.currentStatus()) }

// Service runs the app's chats, model picker, downloads and history. Its
// methods are safe for concurrent use.
type Service struct {
	env
	// statusSeq numbers the statuses Status returns (Status.Seq).
	statusSeq atomic.Uint64

	machine *machine
	loader  *loader
	kvcheck *kvChecker
	picker  *picker
	catalog *catalogBrowser
	chat    *chatPart
	docs    *docStore
	remote  *remotes
	server  *localServer
	quick   *quickActions
	hotkey  *hotkey
	tmpl    *promptTemplates

	warnMu     sync.Mutex
	startErr   string // what was wrong with settings.json at start
	startModel string // loaded by Start instead of the settings' model ("": none)

	closeOnce sync.Once
	closeErr  error
}

// New makes a service on store's settings, with dirs for the demo model's
// cache, the models folder and the history database, which it opens now
// (if that fails, Status says so and chat works without history). Nothing
// is loaded until Start or LoadModel. Close releases it all.
func New(store *settings.Store, dirs settings.Dirs, emit Emitter) *Service {
	if emit == nil {
		emit = func(string, any) {}
	}
	s := &Service{}
	e := env{store: store, dirs: dirs, emit: emit, currentStatus: s.Status}
	s.env = e
	s.machine = newMachine(store)
	s.loader = newLoader(e, s.machine)
	s.picker = &picker{env: e, engine: s.loader, machine: s.machine}
	s.kvcheck = &kvChecker{env: e, machine: s.machine, files: s.picker}
	s.tmpl = &promptTemplates{env: e, engine: s.loader}
	s.loader.files, s.loader.kv, s.loader.templates = s.picker, s.kvcheck, s.tmpl
	s.catalog = newCatalog(e, s.machine, s.picker)
	s.remote = &remotes{env: e, modelsChanged: s.picker.changed}
	s.docs = &docStore{env: e, engine: s.loader, remote: s.remote}
	s.chat = &chatPart{env: e, engine: s.loader, remote: s.remote, docs: s.docs, noteProblem: s.loader.noteProblem,
		reqs: map[string]context.CancelFunc{}}
	s.chat.hist, s.chat.histErr = history.Open(filepath.Join(dirs.Data, HistoryFile))
	s.server = &localServer{env: e, engine: s.loader}
	s.quick = &quickActions{store: store, chat: s.chat}
	s.hotkey = &hotkey{store: store}
	s.picker.startWatch()
	return s
}

// SetSettingsWarning records what was wrong with settings.json when it was
// opened (settings.Open's error), for Diagnostics.
func (s *Service) SetSettingsWarning(err error) {
	if err == nil {
		return
	}
	s.warnMu.Lock()
	s.startErr = err.Error()
	s.warnMu.Unlock()
}

func (s *Service) settingsWarning() string {
	s.warnMu.Lock()
	defer s.warnMu.Unlock()
	return s.startErr
}

// Close stops the downloads (their parts are kept for a resume), ends
// every reply (each is kept in the history with what had streamed), and
// shuts the engine and the history down. Later calls return the first
// call's result.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.chat.close()
		s.docs.close()
		s.loader.refuseLoads()
		s.kvcheck.close()
		s.picker.stopWatch()
		s.server.close()
		s.remote.closeClients()
		s.catalog.close()
		err := s.loader.close() // a load in progress finishes first
		// The streams end once the scheduler has closed them; each stores
		// its reply before it returns.
		done := make(chan struct{})
		go func() { s.chat.wait(); s.kvcheck.wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, errors.New("a reply was still being saved after 10 s"))
		}
		s.closeErr = errors.Join(err, s.chat.closeHistory())
	})
	return s.closeErr
}

// SetStartModel makes Start load path instead of the settings' model
// ("": the settings' model); make run starts the bundled demo so.
func (s *Service) SetStartModel(path string) {
	s.warnMu.Lock()
	s.startModel = path
	s.warnMu.Unlock()
}

// Start loads the model of SetStartModel or else of the settings (with the
// settings' context and KV type, refused like LoadModel when it will not
// fit), or on a first run (no model configured) synthesizes the demo model
// into the cache folder and loads that. It reports through EventPrepare
// and EventStatus and returns what went wrong (also kept in Status).
func (s *Service) Start() error {
	s.server.apply() // answers 503 until the model is in
	s.warnMu.Lock()
	path := s.startModel
	s.warnMu.Unlock()
	if path == "" {
		path = s.store.Get().LastModel
	}
	if path == "" {
		var err error
		if path, err = s.loader.ensureDemo(); err != nil {
			return err
		}
	}
	_, err := s.loader.load(LoadRequest{Path: path, keepRemote: true})
	return err
}

// Status describes the engine now. Error is the last start or load
// failure, else why the history is not kept (chat works regardless).
func (s *Service) Status() Status {
	ls := s.loader.snapshot()
	st := Status{State: ls.state, Error: ls.err, Running: s.chat.running(), Prepare: ls.prepare}
	st.Busy = st.Running > 0
	if st.Error == "" {
		st.Error = s.chat.historyProblem()
	}
	if info, ok := s.loader.engine().Info(); ok {
		m := modelOf(info)
		m.Demo = ls.demo
		m.KVCheck = s.kvcheck.checkFor(info.Path)
		st.Model = &m
	}
	if ep, ok := s.remote.active(); ok {
		m := s.remote.modelInfo(ep)
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

// ---- Chat and history (chat.go, history.go)

// Send starts a reply to req; it streams as events (chatPart.send).
func (s *Service) Send(req SendRequest) (SendResult, error) { return s.chat.send(req) }

// Stop cancels reply id.
func (s *Service) Stop(id string) { s.chat.stop(id) }

// Conversations lists kept conversations, newest first, or those matching query.
func (s *Service) Conversations(query string) ([]ConversationSummary, error) {
	return s.chat.conversations(query)
}

// Conversation restores kept conversation id.
func (s *Service) Conversation(id int64) (Conversation, error) { return s.chat.conversation(id) }

// OpenConversation restores kept conversation id with its documents attached again.
func (s *Service) OpenConversation(id int64) (Conversation, error) {
	return s.chat.openConversation(id)
}

// DeleteConversation deletes kept conversation id.
func (s *Service) DeleteConversation(id int64) error { return s.chat.deleteConversation(id) }

// ExportConversation is kept conversation id as Markdown.
func (s *Service) ExportConversation(id int64) (string, error) { return s.chat.exportConversation(id) }

// ---- Loading and estimates (load.go)

// CheckLoad is the estimate of loading req here.
func (s *Service) CheckLoad(req LoadRequest) (Estimate, error) { return s.loader.checkLoad(req) }

// SmallerContext is the context to offer when req will not fit (0: none).
func (s *Service) SmallerContext(req LoadRequest) (int, error) { return s.loader.smallerContext(req) }

// LoadModel loads req.Path, refused with a *NotFitError when it will not fit.
func (s *Service) LoadModel(req LoadRequest) (Status, error) { return s.loader.load(req) }

// ApplyContext changes the loaded model's context budget and KV type.
func (s *Service) ApplyContext(ctx int, kvName string) (Status, error) {
	return s.loader.applyContext(ctx, kvName)
}

// Estimate evaluates the loaded model at ctx tokens with KV type kvType.
func (s *Service) Estimate(ctx int, kvType string) (Estimate, error) {
	return s.loader.estimate(ctx, kvType)
}

// ---- Local models (models.go)

// Models lists the local GGUF files.
func (s *Service) Models() ([]LocalModel, error) { return s.picker.models() }

// AddModel adds the GGUF at path to the picker after reading its header.
func (s *Service) AddModel(path string) (LocalModel, error) { return s.picker.add(path) }

// ForgetModel removes an added file from the picker; the file stays.
func (s *Service) ForgetModel(path string) error { return s.picker.forget(path) }

// Describe is what the picker shows of the file at path.
func (s *Service) Describe(path string) LocalModel { return s.picker.describe(path) }

// ---- Prompt templates (templates.go)

// PromptTemplate describes the chat template of the model file at path ("": the loaded model).
func (s *Service) PromptTemplate(path string) (PromptTemplateInfo, error) { return s.tmpl.info(path) }

// PreviewPromptTemplate renders the sample conversation with the template req asks for.
func (s *Service) PreviewPromptTemplate(req PromptTemplateRequest) (TemplatePreview, error) {
	return s.tmpl.preview(req)
}

// SavePromptTemplate keeps req's template for its model file and applies it when loaded.
func (s *Service) SavePromptTemplate(req PromptTemplateRequest) (PromptTemplateInfo, error) {
	return s.tmpl.save(req)
}

// ClearPromptTemplate gives the model file at path its own template back.
func (s *Service) ClearPromptTemplate(path string) (PromptTemplateInfo, error) {
	return s.tmpl.clear(path)
}

// LastPrompt is the token ids of the last prompt the local model was given.
func (s *Service) LastPrompt() (LastPrompt, error) { return s.tmpl.lastPrompt() }

// ---- Catalog and downloads (catalog.go, downloads.go)

// Catalog lists the catalog's models with each file's estimate here.
func (s *Service) Catalog() ([]CatalogEntry, error) { return s.catalog.list() }

// CatalogEstimate reads a catalog file's header for an exact estimate.
func (s *Service) CatalogEstimate(id, quant string) (Estimate, error) {
	return s.catalog.estimate(id, quant)
}

// Download starts or resumes downloading a catalog file.
func (s *Service) Download(id, quant string) (Download, error) { return s.catalog.download(id, quant) }

// CancelDownload stops a running download, keeping its part for a resume.
func (s *Service) CancelDownload(id, quant string) { s.catalog.cancelDownload(id, quant) }

// Downloads are this run's downloads, running and ended, by key.
func (s *Service) Downloads() []Download { return s.catalog.downloadList() }

// ---- Documents (documents.go)

// AttachDocumentFile attaches the document at path; it is read in the background.
func (s *Service) AttachDocumentFile(path string) (DocumentInfo, error) {
	return s.docs.attachFile(path)
}

// AttachDocumentData attaches a document given as its name and base64 bytes.
func (s *Service) AttachDocumentData(name, dataBase64 string) (DocumentInfo, error) {
	return s.docs.attachData(name, dataBase64)
}

// RemoveDocument detaches document id (unknown ids are ignored).
func (s *Service) RemoveDocument(id string) { s.docs.remove(id) }

// Documents describes the documents ids and whether each fits whole.
func (s *Service) Documents(ids []string) ([]DocumentInfo, error) { return s.docs.describe(ids) }

// ---- Remote models (remote.go)

// RemoteEndpoints lists the configured endpoints (without their keys).
func (s *Service) RemoteEndpoints() []RemoteEndpoint { return s.remote.endpoints() }

// RemoteModels connects to an endpoint and lists its models.
func (s *Service) RemoteModels(in RemoteEndpointInput) ([]RemoteModel, error) {
	return s.remote.models(in)
}

// SaveRemoteEndpoint adds an endpoint, or replaces the one of the same name.
func (s *Service) SaveRemoteEndpoint(in RemoteEndpointInput) ([]RemoteEndpoint, error) {
	return s.remote.save(in)
}

// RemoveRemoteEndpoint forgets an endpoint and its key.
func (s *Service) RemoveRemoteEndpoint(name string) ([]RemoteEndpoint, error) {
	return s.remote.remove(name)
}

// UseRemote sends chats to the endpoint called name ("": the local model).
func (s *Service) UseRemote(name string) (Status, error) { return s.remote.use(name) }

// ---- Quick actions, the hotkey and the local server

// QuickActions are the quick actions of the settings, in their order.
func (s *Service) QuickActions() []settings.QuickAction { return s.quick.list() }

// RunQuickAction runs the action called name on text in a new conversation.
func (s *Service) RunQuickAction(name, text string) (QuickActionResult, error) {
	return s.quick.run(name, text)
}

// SetHotkeyStatus records what the platform did with the hotkey setting.
func (s *Service) SetHotkeyStatus(st HotkeyStatus) { s.hotkey.set(st) }

// HotkeyStatus says whether the setting's global hotkey is registered.
func (s *Service) HotkeyStatus() HotkeyStatus { return s.hotkey.status() }

// ServerStatus says whether the local server runs, and where.
func (s *Service) ServerStatus() ServerStatus { return s.server.serverStatus() }
