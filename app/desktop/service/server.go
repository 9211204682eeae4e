package service

import (
	"context"
	"os"
	"sync"
	"time"

	"nibble/app/server"
	"nibble/app/settings"
	"nibble/engine/scheduler"
)

// EventServer: the local server started, stopped or failed to start.
const EventServer = "server:status" // ServerStatus

// serverStopGrace is how long replies in progress on the local server may
// finish when it is turned off (on quit they are cancelled at once).
const serverStopGrace = 5 * time.Second

// ServerStatus is the app's local OpenAI-compatible server.
type ServerStatus struct {
	Enabled bool   `json:"enabled"` // the setting
	Running bool   `json:"running"`
	URL     string `json:"url,omitempty"`   // e.g. http://127.0.0.1:11435/v1, while running
	Error   string `json:"error,omitempty"` // why it is not running although enabled
}

// localServer is the app's local server: the running one, the settings
// it was started with, and why it is not running when it should be.
type localServer struct {
	env
	engine localEngine

	mu      sync.Mutex // guards the fields below; held while starting or stopping
	running *server.Listening
	cfg     settings.Server // what running was started with
	err     string
	closed  bool
}

// appEngine is the server's view of the app's engine: whichever scheduler
// the service uses now (a load may replace it), so requests from the
// server queue with the window's.
type appEngine struct{ engine localEngine }

func (e appEngine) Submit(ctx context.Context, r scheduler.Request) (<-chan scheduler.Event, error) {
	return e.engine.engine().Submit(ctx, r)
}

func (e appEngine) Info() (scheduler.ModelInfo, bool) { return e.engine.engine().Info() }

// serverStatus says whether the local server runs, and where.
func (l *localServer) serverStatus() ServerStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statusLocked()
}

func (l *localServer) statusLocked() ServerStatus {
	st := ServerStatus{Enabled: l.store.Get().Server.Enabled, Error: l.err}
	if lis := l.running; lis != nil {
		st.Running, st.URL = true, lis.URL()
	}
	return st
}

// apply starts, restarts or stops the local server to match the
// settings, and reports the outcome as EventServer. A server that cannot
// start (the port is in use) leaves the setting on and says why in
// ServerStatus.Error.
func (l *localServer) apply() ServerStatus {
	want := l.store.Get().Server
	l.mu.Lock()
	if l.closed {
		want.Enabled = false
	}
	changed := false
	if l.running != nil && (!want.Enabled || want != l.cfg) {
		l.stopLocked(serverStopGrace)
		changed = true
	}
	if want.Enabled && l.running == nil {
		lis, err := server.Listen(appEngine{l.engine}, server.Config{Addr: want.Address, Token: want.Token}, os.Stderr)
		if err != nil {
			l.err = err.Error()
		} else {
			l.running, l.cfg, l.err = lis, want, ""
		}
		changed = true
	}
	if !want.Enabled && l.err != "" {
		l.err, changed = "", true
	}
	st := l.statusLocked()
	l.mu.Unlock()
	if changed {
		l.emit(EventServer, st)
	}
	return st
}

// stopLocked shuts the running server down, letting its replies
// finish for up to grace.
func (l *localServer) stopLocked(grace time.Duration) {
	lis := l.running
	if lis == nil {
		return
	}
	l.running = nil
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := lis.Shutdown(ctx); err != nil {
		l.err = "stopping the server: " + err.Error()
	}
}

// close shuts the server down for good (Close): its replies are
// cancelled with the engine's.
func (l *localServer) close() {
	l.mu.Lock()
	l.closed = true
	l.stopLocked(0)
	l.mu.Unlock()
}
