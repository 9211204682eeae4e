// Package desktop is Nibble's app window: a Wails webview whose frontend
// (frontend/, embedded at build time) talks to the engine through App, the
// one bound struct. App's methods are thin: the work is in
// app/desktop/service, which has no Wails or cgo dependency.
//
// The Wails glue needs cgo (WebKitGTK on Linux, Cocoa on macOS) and is in
// run_cgo.go; a cgo-free build gets run_nocgo.go, which says so. Everything
// else here builds and is tested without cgo.
package desktop

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"nibble/app/desktop/service"
	"nibble/app/settings"
)

// AutotestEnv names the environment variable with a prompt the frontend
// sends once the model is ready, for smoke tests and screenshots (make run
// without a display). With it set, each finished reply also prints one line
// on stdout, so a script knows when to take its screenshot.
const AutotestEnv = "NIBBLE_AUTOTEST_PROMPT"

// AutotestStopEnv, with AutotestEnv, names how many streamed pieces of the
// reply the frontend waits for before it clicks Stop (unset or 0: never).
const AutotestStopEnv = "NIBBLE_AUTOTEST_STOP_AFTER"

// StartModelEnv names a model file to load at start-up instead of the
// configured one (make run: the bundled document Q&A demo).
const StartModelEnv = "NIBBLE_START_MODEL"

// StartDocumentEnv names a document the frontend attaches at start-up
// (make run: the demo's sample document); with AutotestEnv, the prompt is
// sent once it has been read.
const StartDocumentEnv = "NIBBLE_START_DOCUMENT"

// StartQuestionEnv names a question the frontend types into the prompt box
// at start-up, without sending it (make run with a display).
const StartQuestionEnv = "NIBBLE_START_QUESTION"

// Autotest is what the frontend does by itself at start-up, for smoke
// tests and the demo: nothing when every field is empty.
type Autotest struct {
	Prompt    string `json:"prompt"`
	StopAfter int    `json:"stopAfter"` // click Stop after this many deltas (0: never)
	Document  string `json:"document"`  // attach this file first ("": none)
	Draft     string `json:"draft"`     // type this into the prompt box, unsent ("": none)
}

// App is bound to the frontend as window.go.desktop.App: each exported
// method is a call from JavaScript. Replies stream back as events (see
// service's Event names).
type App struct {
	svc      *service.Service
	autotest Autotest
	// hasStatusItem says whether a menu-bar item can show the window
	// again (Platform.HasStatusItem); nil: none.
	hasStatusItem func() bool

	mu    sync.Mutex
	shell Shell // set by Startup
}

// Shell is what the window toolkit gives the app once its run loop is up.
type Shell struct {
	Window WindowControl
	Emit   service.Emitter
	// Dialogs are the native dialogs (replaced by scripted ones when
	// NIBBLE_TEST_DIALOGS is set).
	Dialogs Dialogs
	// Quit quits the app through the toolkit, so that Shutdown runs.
	Quit func()
}

func (a *App) setShell(sh Shell) {
	a.mu.Lock()
	a.shell = sh
	a.mu.Unlock()
}

func (a *App) getShell() Shell {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.shell
}

// Status is the engine's state, the loaded model and whether a reply runs.
func (a *App) Status() service.Status { return a.svc.Status() }

// Send starts a reply and returns its id and conversation; the reply
// streams as chat:delta, chat:progress and chat:final events carrying that
// id, and is kept in the conversation's history.
func (a *App) Send(req service.SendRequest) (service.SendResult, error) { return a.svc.Send(req) }

// Stop cancels reply id.
func (a *App) Stop(id string) { a.svc.Stop(id) }

// Estimate is the memory ctx tokens with KV cache type kv would take.
func (a *App) Estimate(ctx int, kv string) (service.Estimate, error) { return a.svc.Estimate(ctx, kv) }

// Autotest is what to do at start-up (nothing normally).
func (a *App) Autotest() Autotest { return a.autotest }

// ---- Models

// Models lists the local GGUF files: the models folder, files added from
// elsewhere and the demo model.
func (a *App) Models() ([]service.LocalModel, error) { return a.svc.Models() }

// AddModel adds a GGUF file from outside the models folder to the picker
// (open dialog, file dropped on the window), after reading its header.
func (a *App) AddModel(path string) (service.LocalModel, error) { return a.svc.AddModel(path) }

// ForgetModel removes an added file from the picker; the file stays.
func (a *App) ForgetModel(path string) error { return a.svc.ForgetModel(path) }

// ChooseModelFile shows the open-file dialog for a .gguf file and adds
// it; "" when the user cancels.
func (a *App) ChooseModelFile() (string, error) { return a.chooseModelFile() }

// CheckLoad is the estimate of loading req on this machine.
func (a *App) CheckLoad(req service.LoadRequest) (service.Estimate, error) {
	return a.svc.CheckLoad(req)
}

// LoadModel loads req.Path with its context and KV type. A load that will
// not fit is refused before anything is allocated; when a smaller context
// would fit, a native dialog asks first whether to load with that.
func (a *App) LoadModel(req service.LoadRequest) (service.Status, error) { return a.loadModel(req) }

// ApplyContext changes the loaded model's context budget and KV type
// (refused, keeping the old ones, when it will not fit).
func (a *App) ApplyContext(ctx int, kv string) (service.Status, error) {
	return a.svc.ApplyContext(ctx, kv)
}

// ---- Prompt templates

// PromptTemplate describes a model file's chat template and where it
// comes from ("": the loaded model).
func (a *App) PromptTemplate(path string) (service.PromptTemplateInfo, error) {
	return a.svc.PromptTemplate(path)
}

// PreviewPromptTemplate renders a sample conversation with a template.
func (a *App) PreviewPromptTemplate(req service.PromptTemplateRequest) (service.TemplatePreview, error) {
	return a.svc.PreviewPromptTemplate(req)
}

// SavePromptTemplate keeps a model file's template (custom or none).
func (a *App) SavePromptTemplate(req service.PromptTemplateRequest) (service.PromptTemplateInfo, error) {
	return a.svc.SavePromptTemplate(req)
}

// ClearPromptTemplate gives a model file its own template back.
func (a *App) ClearPromptTemplate(path string) (service.PromptTemplateInfo, error) {
	return a.svc.ClearPromptTemplate(path)
}

// LastPrompt is the token ids of the last prompt the local model was given.
func (a *App) LastPrompt() (service.LastPrompt, error) { return a.svc.LastPrompt() }

// ---- Catalog and downloads

// Catalog lists the catalog's models with each file's estimate here.
func (a *App) Catalog() ([]service.CatalogEntry, error) { return a.svc.Catalog() }

// CatalogEstimate reads one catalog file's header (HTTP range requests)
// for an exact estimate before it is downloaded.
func (a *App) CatalogEstimate(id, quant string) (service.Estimate, error) {
	return a.svc.CatalogEstimate(id, quant)
}

// Download starts (or resumes) downloading a catalog file; progress
// arrives as download:progress events.
func (a *App) Download(id, quant string) (service.Download, error) { return a.svc.Download(id, quant) }

// CancelDownload stops a download and keeps what it fetched for a resume.
func (a *App) CancelDownload(id, quant string) { a.svc.CancelDownload(id, quant) }

// Downloads are the running and finished downloads of this run.
func (a *App) Downloads() []service.Download { return a.svc.Downloads() }

// ---- History

// Conversations lists kept conversations, newest first, or those matching
// query (full-text search) when it is not empty.
func (a *App) Conversations(query string) ([]service.ConversationSummary, error) {
	return a.svc.Conversations(query)
}

// Conversation restores one kept conversation.
func (a *App) Conversation(id int64) (service.Conversation, error) { return a.svc.Conversation(id) }

// OpenConversation reopens a kept conversation in the chat, its documents attached again.
func (a *App) OpenConversation(id int64) (service.Conversation, error) {
	return a.svc.OpenConversation(id)
}

// DeleteConversation deletes a kept conversation.
func (a *App) DeleteConversation(id int64) error { return a.svc.DeleteConversation(id) }

// ExportConversation is a kept conversation as Markdown.
func (a *App) ExportConversation(id int64) (string, error) { return a.svc.ExportConversation(id) }

// SaveConversation asks where to save a conversation as Markdown and
// writes it there; "" when the user cancels.
func (a *App) SaveConversation(id int64) (string, error) { return a.saveConversation(id) }

// ---- Documents attached to the chat

// AttachDocumentFile attaches the document at path (dropped on the window);
// it is read in the background, with document:changed events.
func (a *App) AttachDocumentFile(path string) (service.DocumentInfo, error) {
	return a.svc.AttachDocumentFile(path)
}

// AttachDocumentData attaches a document given as its name and base64 bytes
// (dropped on the page, which has no path).
func (a *App) AttachDocumentData(name, dataBase64 string) (service.DocumentInfo, error) {
	return a.svc.AttachDocumentData(name, dataBase64)
}

// RemoveDocument detaches an attached document.
func (a *App) RemoveDocument(id string) { a.svc.RemoveDocument(id) }

// Documents describes attached documents and whether each fits whole.
func (a *App) Documents(ids []string) ([]service.DocumentInfo, error) { return a.svc.Documents(ids) }

// ---- Settings and diagnostics

// Settings are the user's settings.
func (a *App) Settings() settings.Settings { return a.svc.Settings() }

// UpdateSettings validates and saves s, and returns what is in force.
func (a *App) UpdateSettings(s settings.Settings) (settings.Settings, error) {
	return a.svc.UpdateSettings(s)
}

// Diagnostics describes the machine, the budget, the backend and the
// loaded model.
func (a *App) Diagnostics() service.Diagnostics { return a.svc.Diagnostics() }

// ---- Quick actions, the global hotkey and the local server

// QuickActions are the quick actions of the settings, in their order.
func (a *App) QuickActions() []settings.QuickAction { return a.svc.QuickActions() }

// RunQuickAction runs the action called name on text (the clipboard's) in
// a new conversation; the reply streams like Send's.
func (a *App) RunQuickAction(name, text string) (service.QuickActionResult, error) {
	return a.svc.RunQuickAction(name, text)
}

// HotkeyStatus says whether the settings' global hotkey is registered.
func (a *App) HotkeyStatus() service.HotkeyStatus { return a.svc.HotkeyStatus() }

// ServerStatus says whether the local server runs, and where.
func (a *App) ServerStatus() service.ServerStatus { return a.svc.ServerStatus() }

// ---- Remote models (OpenAI-compatible endpoints)

// RemoteEndpoints lists the configured endpoints (never their keys).
func (a *App) RemoteEndpoints() []service.RemoteEndpoint { return a.svc.RemoteEndpoints() }

// RemoteModels connects to an endpoint and lists the models it serves.
func (a *App) RemoteModels(in service.RemoteEndpointInput) ([]service.RemoteModel, error) {
	return a.svc.RemoteModels(in)
}

// SaveRemoteEndpoint adds an endpoint or replaces the one of its name.
func (a *App) SaveRemoteEndpoint(in service.RemoteEndpointInput) ([]service.RemoteEndpoint, error) {
	return a.svc.SaveRemoteEndpoint(in)
}

// RemoveRemoteEndpoint forgets an endpoint and its key.
func (a *App) RemoveRemoteEndpoint(name string) ([]service.RemoteEndpoint, error) {
	return a.svc.RemoveRemoteEndpoint(name)
}

// UseRemote sends chats to the endpoint called name ("": the local model).
func (a *App) UseRemote(name string) (service.Status, error) { return a.svc.UseRemote(name) }

// CanHideWindow says whether the window may hide (Escape): only where a
// menu-bar item can show it again.
func (a *App) CanHideWindow() bool { return a.canHideWindow() }

// HideWindow hides the popover (Escape); without a menu-bar item to bring
// it back it does nothing.
func (a *App) HideWindow() { a.hideWindow() }

// Quit quits the app (through Wails, so Shutdown runs).
func (a *App) Quit() { a.quit() }

// Desktop is the app apart from its window toolkit: the bound App, the
// platform's window behaviour and the hooks of the window's lifetime.
type Desktop struct {
	App      *App
	Platform Platform
	svc      *service.Service
	emitTo   atomic.Pointer[service.Emitter]
	log      io.Writer // where the autotest and scripted dialogs' lines go
	// scripted replaces the native dialogs (NIBBLE_TEST_DIALOGS); nil
	// normally.
	scripted *scriptedDialogs

	modelMu   sync.Mutex
	modelName string // last told to Platform.ModelChanged

	settingsMu sync.Mutex // serializes settingsChanged (quick.go)
}

// New opens the settings in the user's folders and makes the engine
// service; nothing is loaded until Startup.
func New() (*Desktop, error) {
	dirs, err := settings.DefaultDirs()
	if err != nil {
		return nil, err
	}
	if err := dirs.Ensure(); err != nil {
		return nil, err
	}
	store, warn := settings.Open(dirs.SettingsFile())
	if warn != nil {
		// A *Warning (the file was set aside) or an unreadable file: the
		// store holds the defaults either way, and the app can run.
		fmt.Fprintln(os.Stderr, "nibble:", warn)
	}
	d := &Desktop{Platform: newPlatform(), log: os.Stdout}
	if d.scripted, err = scriptedFromEnv(func() io.Writer { return d.log }); err != nil {
		return nil, err
	}
	d.svc = service.New(store, dirs, d.emit)
	d.svc.SetSettingsWarning(warn)
	d.svc.SetStartModel(os.Getenv(StartModelEnv))
	d.App = &App{svc: d.svc, autotest: autotestFromEnv(), hasStatusItem: func() bool { return d.Platform.HasStatusItem() }}
	return d, nil
}

func autotestFromEnv() Autotest {
	t := Autotest{Prompt: os.Getenv(AutotestEnv), Document: os.Getenv(StartDocumentEnv), Draft: os.Getenv(StartQuestionEnv)}
	if n, err := strconv.Atoi(os.Getenv(AutotestStopEnv)); err == nil && n > 0 {
		t.StopAfter = n
	}
	return t
}

// emit forwards an event to the window once it is up, and tells the
// platform when the loaded model changes (the status item's menu).
func (d *Desktop) emit(name string, data any) {
	if f := d.emitTo.Load(); f != nil {
		(*f)(name, data)
	}
	if st, ok := data.(service.Status); ok && name == service.EventStatus {
		d.modelChanged(st)
	}
	if name == service.EventSettings {
		d.settingsChanged()
	}
	if d.App.autotest.Prompt == "" || name != service.EventFinal {
		return
	}
	if f, ok := data.(service.Final); ok {
		fmt.Fprintf(d.log, "autotest: reply %s ended (%s): %d tokens, first token after %.0f ms, %.1f tok/s: %q\n",
			f.ID, f.FinishReason, f.GenTokens, f.TTFTMs, f.DecodeTokPerSec, replyHead(f.Text))
	}
}

// replyHead is the start of a reply for the autotest line: enough to check
// an answer, not a page of a random model's text.
func replyHead(text string) string {
	const most = 80
	text = strings.TrimSpace(text)
	if r := []rune(text); len(r) > most {
		return string(r[:most]) + "…"
	}
	return text
}

// modelChanged calls Platform.ModelChanged when the loaded model's name
// is not the one it was last told.
func (d *Desktop) modelChanged(st service.Status) {
	name := ""
	if r := st.Remote; r != nil {
		name = r.Name + " (remote)" // where chats go
	} else if m := st.Model; m != nil {
		name = m.Name
		if m.Demo {
			name = service.DemoName
		}
	} else if st.State == service.StateLoading || st.State == service.StatePreparing {
		return // between two models: keep the old name until the new one is in
	}
	d.modelMu.Lock()
	changed := name != d.modelName
	d.modelName = name
	d.modelMu.Unlock()
	if changed {
		d.Platform.ModelChanged(name)
	}
}

// Startup runs when the window's run loop is up: events go to sh.Emit
// from now on, the bound methods get the window and its dialogs, the
// platform sets itself up, and the model loads in the background (the
// demo model is synthesized first on a first run).
func (d *Desktop) Startup(ctx context.Context, sh Shell) {
	if d.scripted != nil {
		sh.Dialogs = d.scripted
	}
	d.App.setShell(sh)
	emit := sh.Emit
	if emit == nil {
		emit = func(string, any) {}
	}
	d.emitTo.Store(&emit)
	if err := d.Platform.Started(ctx, sh.Window); err != nil {
		fmt.Fprintln(os.Stderr, "nibble:", err)
	}
	go d.settingsChanged() // the hotkey registers through the main queue, which runs after this returns
	go func() {
		// The error is in Status too, where the window shows it.
		if err := d.svc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "nibble:", err)
		}
	}()
}

// Shutdown ends every reply and closes the engine.
func (d *Desktop) Shutdown() {
	if err := d.svc.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "nibble: shutting the engine down:", err)
	}
}
