package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"syscall"
)

// Listening is a server accepting connections on its address: what
// `nibble serve` and the app's "Local server" switch both run.
type Listening struct {
	Handler *Server
	srv     *http.Server
	ln      net.Listener
	done    chan struct{} // closed when Serve has returned
	err     error         // what Serve returned, set before done closes
	// stopReplies cancels every request's context: the replies in
	// progress end at once.
	stopReplies context.CancelFunc
}

// Listen checks cfg (CheckBind, CORS origins), listens on cfg.Addr and
// serves the API on sched in the background. The handler is configured
// with the listener's own address ("localhost" resolved, port 0 chosen).
// A port already in use is an error that says so. errLog receives the
// HTTP server's own complaints (bad TLS handshakes and the like); nil
// discards them.
func Listen(sched Engine, cfg Config, errLog io.Writer) (*Listening, error) {
	if _, err := New(nil, cfg); err != nil { // CheckBind and the CORS origins, before binding
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("cannot listen on %s: the port is in use by another program (another Nibble, Ollama, llama-server?); choose another port: %w", cfg.Addr, err)
		}
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Addr, err)
	}
	cfg.Addr = ln.Addr().String()
	h, err := New(sched, cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if errLog == nil {
		errLog = io.Discard
	}
	base, stopReplies := context.WithCancel(context.Background())
	l := &Listening{Handler: h, ln: ln, done: make(chan struct{}), stopReplies: stopReplies,
		srv: &http.Server{
			Handler: h,
			// No ReadTimeout or WriteTimeout: replies stream for minutes.
			// The body's deadline is set per request (ServeHTTP, readBody).
			ReadHeaderTimeout: h.cfg.HeaderTimeout,
			IdleTimeout:       h.cfg.IdleTimeout,
			BaseContext:       func(net.Listener) context.Context { return base },
			ErrorLog:          log.New(errLog, "nibble serve: ", 0),
		}}
	go func() {
		l.err = l.srv.Serve(ln)
		close(l.done)
	}()
	return l, nil
}

// Addr is the address the server listens on, e.g. "127.0.0.1:11435".
func (l *Listening) Addr() string { return l.ln.Addr().String() }

// URL is the API's base URL, e.g. "http://127.0.0.1:11435/v1".
func (l *Listening) URL() string { return "http://" + l.Addr() + "/v1" }

// Done is closed when the server has stopped serving: after Shutdown, or
// on its own when the listener failed (Err says why).
func (l *Listening) Done() <-chan struct{} { return l.done }

// Err is why serving stopped, once Done is closed: nil after Shutdown.
func (l *Listening) Err() error {
	<-l.done
	if errors.Is(l.err, http.ErrServerClosed) {
		return nil
	}
	return l.err
}

// Shutdown closes the listener at once and lets the replies in progress
// finish until ctx ends; then it cancels them and closes the connections.
// It returns when the server has stopped.
func (l *Listening) Shutdown(ctx context.Context) error {
	err := l.srv.Shutdown(ctx)
	l.stopReplies() // their request contexts derive from base
	if err != nil {
		l.srv.Close() // out of time: the replies are cancelled, close the connections
	}
	if serr := l.Err(); serr != nil {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil // the replies were cancelled, as asked
	}
	return err
}
