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

// appServer is the running server and the settings it was started with.
type appServer struct {
	mu      sync.Mutex // held while starting or stopping
	running *server.Listening
	cfg     settings.Server // what running was started with
	err     string
}

// appEngine is the server's view of the app's engine: whichever scheduler
// the service uses now (a load may replace it), so requests from the
// server queue with the window's.
type appEngine struct{ s *Service }

func (e appEngine) Submit(ctx context.Context, r scheduler.Request) (<-chan scheduler.Event, error) {
	return e.s.engine().Submit(ctx, r)
}

func (e appEngine) Info() (scheduler.ModelInfo, bool) { return e.s.engine().Info() }

// ServerStatus says whether the local server runs, and where.
func (s *Service) ServerStatus() ServerStatus {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	return s.serverStatusLocked()
}

func (s *Service) serverStatusLocked() ServerStatus {
	st := ServerStatus{Enabled: s.store.Get().Server.Enabled, Error: s.server.err}
	if l := s.server.running; l != nil {
		st.Running, st.URL = true, l.URL()
	}
	return st
}

// applyServer starts, restarts or stops the local server to match the
// settings, and reports the outcome as EventServer. A server that cannot
// start (the port is in use) leaves the setting on and says why in
// ServerStatus.Error.
func (s *Service) applyServer() ServerStatus {
	want := s.store.Get().Server
	s.server.mu.Lock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		want.Enabled = false
	}
	changed := false
	if s.server.running != nil && (!want.Enabled || want != s.server.cfg) {
		s.stopServerLocked(serverStopGrace)
		changed = true
	}
	if want.Enabled && s.server.running == nil {
		l, err := server.Listen(appEngine{s}, server.Config{Addr: want.Address, Token: want.Token}, os.Stderr)
		if err != nil {
			s.server.err = err.Error()
		} else {
			s.server.running, s.server.cfg, s.server.err = l, want, ""
		}
		changed = true
	}
	if !want.Enabled && s.server.err != "" {
		s.server.err, changed = "", true
	}
	st := s.serverStatusLocked()
	s.server.mu.Unlock()
	if changed {
		s.emit(EventServer, st)
	}
	return st
}

// stopServerLocked shuts the running server down, letting its replies
// finish for up to grace.
func (s *Service) stopServerLocked(grace time.Duration) {
	l := s.server.running
	if l == nil {
		return
	}
	s.server.running = nil
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := l.Shutdown(ctx); err != nil {
		s.server.err = "stopping the server: " + err.Error()
	}
}

// stopServer shuts the server down for Close: its replies are cancelled
// with the engine's.
func (s *Service) stopServer() {
	s.server.mu.Lock()
	s.stopServerLocked(0)
	s.server.mu.Unlock()
}
