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

// Autotest is what the frontend does by itself at start-up, for smoke
// tests: nothing when Prompt is "".
type Autotest struct {
	Prompt    string `json:"prompt"`
	StopAfter int    `json:"stopAfter"` // click Stop after this many deltas (0: never)
}

// App is bound to the frontend as window.go.desktop.App: each exported
// method is a call from JavaScript. Replies stream back as events (see
// service's Event names).
type App struct {
	svc      *service.Service
	autotest Autotest
}

// Status is the engine's state, the loaded model and whether a reply runs.
func (a *App) Status() service.Status { return a.svc.Status() }

// LoadModel loads the GGUF file at path and makes it the model the app
// starts with.
func (a *App) LoadModel(path string) (service.Status, error) { return a.svc.LoadModel(path) }

// Send starts a reply and returns its id; the reply streams as chat:delta,
// chat:progress and chat:final events carrying that id.
func (a *App) Send(req service.SendRequest) (string, error) { return a.svc.Send(req) }

// Stop cancels reply id.
func (a *App) Stop(id string) { a.svc.Stop(id) }

// Estimate is the memory ctx tokens with KV cache type kv would take.
func (a *App) Estimate(ctx int, kv string) (service.Estimate, error) { return a.svc.Estimate(ctx, kv) }

// Autotest is what to do at start-up (nothing normally).
func (a *App) Autotest() Autotest { return a.autotest }

// Desktop is the app apart from its window toolkit: the bound App, the
// platform's window behaviour and the hooks of the window's lifetime.
type Desktop struct {
	App      *App
	Platform Platform
	svc      *service.Service
	emitTo   atomic.Pointer[service.Emitter]
	log      io.Writer // where the autotest lines go
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
	store, err := settings.Open(dirs.SettingsFile())
	if err != nil {
		// A *Warning (the file was set aside) or an unreadable file: the
		// store holds the defaults either way, and the app can run.
		fmt.Fprintln(os.Stderr, "nibble:", err)
	}
	d := &Desktop{Platform: newPlatform(), log: os.Stdout}
	d.svc = service.New(store, dirs, d.emit)
	d.App = &App{svc: d.svc, autotest: autotestFromEnv()}
	return d, nil
}

func autotestFromEnv() Autotest {
	t := Autotest{Prompt: os.Getenv(AutotestEnv)}
	if n, err := strconv.Atoi(os.Getenv(AutotestStopEnv)); err == nil && n > 0 {
		t.StopAfter = n
	}
	return t
}

// emit forwards an event to the window once it is up.
func (d *Desktop) emit(name string, data any) {
	if f := d.emitTo.Load(); f != nil {
		(*f)(name, data)
	}
	if d.App.autotest.Prompt == "" || name != service.EventFinal {
		return
	}
	if f, ok := data.(service.Final); ok {
		fmt.Fprintf(d.log, "autotest: reply %s ended (%s): %d tokens, first token after %.0f ms, %.1f tok/s\n",
			f.ID, f.FinishReason, f.GenTokens, f.TTFTMs, f.DecodeTokPerSec)
	}
}

// Startup runs when the window's run loop is up: events go to emit from
// now on, the platform sets itself up, and the model loads in the
// background (the demo model is synthesized first on a first run).
func (d *Desktop) Startup(ctx context.Context, w WindowControl, emit service.Emitter) {
	d.emitTo.Store(&emit)
	if err := d.Platform.Started(ctx, w); err != nil {
		fmt.Fprintln(os.Stderr, "nibble:", err)
	}
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
