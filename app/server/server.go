// Package server is Nibble's local, OpenAI-compatible HTTP API over the
// engine scheduler (`nibble serve`), for tools that speak OpenAI's protocol
// as they do to llama-server, Ollama's /v1 or LM Studio's server:
//
//	GET  /v1/models            the loaded model (one entry; none when no model is loaded)
//	GET  /v1/models/{id}       that model
//	POST /v1/chat/completions  chat, streamed (SSE) or not
//	POST /v1/completions       plain completion, streamed or not
//	GET  /v1/nibble/stats      request counters; answered only to loopback peers
//
// Model names. The id is a stable slug of the model's file name
// ("tiny-qwen2-q4_0" for tiny-qwen2-q4_0.gguf). Like Ollama, a request that
// names a model other than the loaded one gets 404 model_not_found (a reply
// from another model than the one asked for would be mislabelled); the file
// name and the model's general.name are accepted as aliases, in any case. A
// request with no model (or "") gets the loaded one, as llama-server does.
// Config.AnyModel (`nibble serve --any-model`) accepts any name for the one
// loaded model, as llama-server and LM Studio's single-model server do, for
// clients with a hard-coded model name.
//
// Sampling. Unset parameters take the CLI's (and llama-server's) defaults:
// temperature 0.8, top_p 0.95, top_k 40, min_p 0.05. temperature, top_p,
// max_tokens / max_completion_tokens, stop, seed, presence_penalty and
// frequency_penalty map to the engine's sampler; llama-server's top_k,
// min_p, repeat_penalty and ignore_eos (which bans the end-of-generation
// tokens) are accepted too. n must be 1; tools, logprobs (and top_logprobs,
// which needs logprobs), non-text response formats and non-text content
// parts are refused (400) rather than ignored. Without a seed, each request
// draws one. A completion's text continues its prompt, so it keeps its first
// word's leading space, as llama-server's does; a chat reply starts without.
//
// Errors use OpenAI's shape, {"error":{"message","type","param","code"}}:
// 400 invalid_request_error (bad JSON, wrong types, unknown roles, prompt +
// max_tokens over the context budget with the numbers), 401 invalid_api_key,
// 403 host_not_allowed / origin_not_allowed, 404 model_not_found or
// not_found, 405 method_not_allowed, 413 request_too_large, 429 with
// Retry-After when the scheduler's queue is full, 503 when no model is
// loaded. A generation that is cancelled (the model was unloaded, the server
// is stopping) or fails ends a stream with an error event and no [DONE]; a
// client that disconnects cancels its generation.
//
// Security. A server bound to a loopback address answers only requests
// whose Host header is a loopback name or address (a DNS-rebinding defence,
// as in Ollama). A bearer token is optional on loopback and required on any
// other address: New refuses to build the handler otherwise. Browsers are
// let in only from the configured CORS origins (none by default); a request
// that carries any other Origin is refused.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"nibble/engine/scheduler"
)

// DefaultMaxBodyBytes is the default request body limit.
const DefaultMaxBodyBytes = 8 << 20

// Config sets up a Server. Zero values take the defaults.
type Config struct {
	// Addr is the address the server listens on, host:port (the
	// listener's own address is best: "127.0.0.1:11435"). A loopback host
	// turns on the Host check; any other host requires Token.
	Addr string
	// Token, when set, must come as "Authorization: Bearer <Token>".
	Token string
	// CORSOrigins are the browser origins allowed ("http://localhost:3000");
	// "*" allows any origin and must be asked for.
	CORSOrigins []string
	// MaxBodyBytes limits a request body (default 8 MiB); beyond it: 413.
	MaxBodyBytes int64
	// BodyTimeout bounds the time to read a request body (default 60s).
	BodyTimeout time.Duration
	// HeaderTimeout bounds the time to read a request's headers (default
	// 10s); IdleTimeout how long a kept-alive connection may wait for its
	// next request (default 2 min). Listen applies them.
	HeaderTimeout, IdleTimeout time.Duration
	// AnyModel accepts any model name for the loaded model.
	AnyModel bool
	// RetryAfter is the Retry-After of a 429 (default 1s).
	RetryAfter time.Duration
}

// Engine is what the server runs requests on: the engine scheduler
// (*scheduler.Scheduler), or a frontend's view of the one it currently
// uses (the app replaces its scheduler when the slots or threads change).
type Engine interface {
	Submit(ctx context.Context, r scheduler.Request) (<-chan scheduler.Event, error)
	Info() (scheduler.ModelInfo, bool)
}

// Server is an http.Handler serving the OpenAI-compatible API.
type Server struct {
	sched     Engine
	cfg       Config
	loopback  bool // bound to a loopback address: check Host
	origins   map[string]bool
	anyOrigin bool

	requests, active, completed, cancelled, failed, rejected atomic.Int64
	promptTokens, completionTokens, cancelledTokens          atomic.Int64
}

// Stats are the server's counters since it started.
type Stats struct {
	// Requests is how many generations were accepted by the scheduler.
	Requests int64 `json:"requests"`
	// Active is how many accepted generations have not ended.
	Active    int64 `json:"active"`
	Completed int64 `json:"completed"` // ended with stop or length
	Cancelled int64 `json:"cancelled"` // the client went away, or the model was unloaded
	Failed    int64 `json:"failed"`    // ended with an engine error
	// Rejected counts error replies given before any generation (4xx, 5xx).
	Rejected         int64 `json:"rejected"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// CancelledCompletionTokens are the tokens generated by cancelled
	// requests (included in CompletionTokens).
	CancelledCompletionTokens int64 `json:"cancelled_completion_tokens"`
}

// IsLoopback reports whether addr (host:port or a host) is on a loopback
// interface only: "localhost", 127.0.0.0/8 or ::1. An empty host (":8080")
// means every interface and is not loopback.
func IsLoopback(addr string) bool {
	host := hostOf(addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostOf is the host of host:port or of a bare host, lower-cased, without
// brackets or a trailing dot.
func hostOf(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// CheckBind refuses a non-loopback address without a token: anyone who can
// reach the address could otherwise use the model.
func CheckBind(addr, token string) error {
	if strings.ContainsAny(token, " \t\r\n") {
		return errors.New("the token must not contain spaces")
	}
	if token == "" && !IsLoopback(addr) {
		return fmt.Errorf("refusing to listen on %s without a token: every machine that can reach it could use the model; pass --token T (clients send Authorization: Bearer T) or listen on 127.0.0.1", addr)
	}
	return nil
}

var originRE = regexp.MustCompile(`^https?://[^/?#\s]+$`)

// New makes the handler for sched. It refuses a non-loopback Addr without a
// Token, and malformed CORS origins.
func New(sched Engine, cfg Config) (*Server, error) {
	if err := CheckBind(cfg.Addr, cfg.Token); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = time.Minute
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	s := &Server{sched: sched, cfg: cfg, loopback: IsLoopback(cfg.Addr), origins: map[string]bool{}}
	for _, o := range cfg.CORSOrigins {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		switch {
		case o == "*":
			s.anyOrigin = true
		case originRE.MatchString(o):
			s.origins[strings.ToLower(o)] = true
		default:
			return nil, fmt.Errorf("CORS origin %q: want scheme://host[:port], e.g. http://localhost:3000 (or * for any origin)", o)
		}
	}
	return s, nil
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Active: s.active.Load(), Completed: s.completed.Load(),
		Cancelled: s.cancelled.Load(), Failed: s.failed.Load(), Rejected: s.rejected.Load(),
		PromptTokens: s.promptTokens.Load(), CompletionTokens: s.completionTokens.Load(),
		CancelledCompletionTokens: s.cancelledTokens.Load()}
}

// route is one endpoint: the method it answers and its handler.
type route struct {
	method  string
	handler func(*Server, http.ResponseWriter, *http.Request)
}

var routes = map[string]route{
	"/v1/models":           {http.MethodGet, (*Server).listModels},
	"/v1/chat/completions": {http.MethodPost, (*Server).chatCompletions},
	"/v1/completions":      {http.MethodPost, (*Server).completions},
	"/v1/nibble/stats":     {http.MethodGet, (*Server).stats},
}

func lookupRoute(path string) (route, bool) {
	if rt, ok := routes[path]; ok {
		return rt, true
	}
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && id != "" {
		return route{http.MethodGet, (*Server).getModel}, true
	}
	return route{}, false
}

// ServeHTTP checks the Host, the Origin and the token, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every read has a deadline: the body's starts now (readBody renews
	// it, then lifts it for the reply), so a client that sends headers and
	// withholds the body holds its connection no longer than BodyTimeout,
	// even on a route that never reads the body.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported on some writers: fine
	if r.ContentLength != 0 {
		// A refusal before the body is read closes the connection rather
		// than waiting to drain a body that may never come.
		w = &closeOnRefusal{ResponseWriter: w}
	}
	if s.loopback && !loopbackHost(r.Host) {
		s.fail(w, &apiError{status: http.StatusForbidden, code: "host_not_allowed",
			msg: fmt.Sprintf("the Host header %q is not a loopback name or address: this server listens on loopback and answers only requests addressed to localhost or 127.0.0.1 (a defence against DNS rebinding)", r.Host)})
		return
	}
	if len(s.origins) > 0 || s.anyOrigin {
		w.Header().Add("Vary", "Origin")
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !s.originAllowed(origin) {
			s.fail(w, &apiError{status: http.StatusForbidden, code: "origin_not_allowed",
				msg: fmt.Sprintf("browser requests from origin %q are not allowed; start the server with --cors %s to allow them", origin, origin)})
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
	}
	rt, known := lookupRoute(r.URL.Path)
	if r.Method == http.MethodOptions {
		s.options(w, r, rt, known)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nibble"`)
		s.fail(w, &apiError{status: http.StatusUnauthorized, code: "invalid_api_key",
			msg: "missing or wrong API key: send the server's token as Authorization: Bearer <token>"})
		return
	}
	if !known {
		s.fail(w, &apiError{status: http.StatusNotFound, code: "not_found",
			msg: fmt.Sprintf("no endpoint %s %s; this server has GET /v1/models, POST /v1/chat/completions and POST /v1/completions", r.Method, r.URL.Path)})
		return
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method+", OPTIONS")
		s.fail(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
			msg: fmt.Sprintf("%s does not take %s; use %s", r.URL.Path, r.Method, rt.method)})
		return
	}
	rt.handler(s, w, r)
}

// closeOnRefusal marks a reply given before the request body was read
// "Connection: close", so net/http sends it at once instead of first
// draining the unread body.
type closeOnRefusal struct {
	http.ResponseWriter
	bodyRead bool
}

func (c *closeOnRefusal) WriteHeader(code int) {
	if !c.bodyRead {
		c.Header().Set("Connection", "close")
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *closeOnRefusal) Write(p []byte) (int, error) {
	if !c.bodyRead {
		c.Header().Set("Connection", "close")
	}
	return c.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *closeOnRefusal) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// options answers a CORS preflight (the Origin was checked) or a plain
// OPTIONS. Preflights carry no credentials, so they need no token.
func (s *Server) options(w http.ResponseWriter, r *http.Request, rt route, known bool) {
	if !known {
		s.fail(w, &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("no endpoint %s", r.URL.Path)})
		return
	}
	h := w.Header()
	h.Set("Allow", rt.method+", OPTIONS")
	if r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", rt.method+", OPTIONS")
		// The origin is trusted: let it send the headers it asks for
		// (OpenAI's SDKs send several x-stainless-* headers).
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && headerListRE.MatchString(req) {
			h.Set("Access-Control-Allow-Headers", req)
		} else {
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		}
		h.Set("Access-Control-Max-Age", "600")
		// Chrome asks before a public site may call a local server.
		if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

var headerListRE = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_|~-]+)*$`)

func (s *Server) originAllowed(origin string) bool {
	return s.anyOrigin || s.origins[strings.ToLower(strings.TrimSuffix(origin, "/"))]
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) == 1
}

// loopbackHost accepts a Host header naming localhost (or a *.localhost
// name, which resolves to loopback by RFC 6761) or a loopback address, with
// any port. An empty Host (HTTP/1.0) is not something a browser sends.
func loopbackHost(hostport string) bool {
	return hostport == "" || IsLoopback(hostport) || strings.HasSuffix(hostOf(hostport), ".localhost")
}

// stats serves the counters to loopback peers only (they say how the
// server is used; a remote client has no business knowing).
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		s.fail(w, &apiError{status: http.StatusNotFound, code: "not_found", msg: "no endpoint " + r.URL.Path})
		return
	}
	writeJSON(w, http.StatusOK, s.Stats())
}

// modelObject is one entry of /v1/models.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Nibble's additions.
	Name          string `json:"name"`
	Arch          string `json:"arch"`
	ContextLength int    `json:"context_length"`
	Slots         int    `json:"slots"`
}

// ModelID is the stable id of a model file: its base name without .gguf,
// lower-cased, with runs of characters other than letters, digits, '.',
// '_' and '-' turned into '-'.
func ModelID(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if id := slug(base); id != "" {
		return id
	}
	return "model"
}

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteRune(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-.")
}

func (s *Server) modelObject(info scheduler.ModelInfo) modelObject {
	var created int64
	if fi, err := os.Stat(info.Path); err == nil {
		created = fi.ModTime().Unix()
	}
	return modelObject{ID: ModelID(info.Path), Object: "model", Created: created, OwnedBy: "nibble",
		Name: info.Name, Arch: info.Arch, ContextLength: info.Options.Ctx, Slots: info.Slots}
}

// matchModel says whether name designates the loaded model.
func matchModel(name string, info scheduler.ModelInfo) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	base := strings.ToLower(filepath.Base(info.Path))
	return n == ModelID(info.Path) || n == base || n == strings.TrimSuffix(base, ".gguf") ||
		n == strings.ToLower(info.Name) || (slug(info.Name) != "" && n == slug(info.Name))
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	data := []modelObject{}
	if info, ok := s.sched.Info(); ok {
		data = append(data, s.modelObject(info))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	info, ok := s.sched.Info()
	if !ok || !matchModel(id, info) {
		s.fail(w, s.modelNotFound(id, info, ok))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(info))
}

func (s *Server) modelNotFound(name string, info scheduler.ModelInfo, loaded bool) *apiError {
	if !loaded {
		return &apiError{status: http.StatusNotFound, code: "model_not_found", param: "model",
			msg: fmt.Sprintf("the model %q does not exist: no model is loaded", name)}
	}
	return &apiError{status: http.StatusNotFound, code: "model_not_found", param: "model",
		msg: fmt.Sprintf("the model %q is not loaded; the loaded model is %q (omit \"model\" to use it)", name, ModelID(info.Path))}
}

// resolveModel returns the id a request for name runs on.
func (s *Server) resolveModel(name string) (string, *apiError) {
	info, ok := s.sched.Info()
	switch {
	case !ok:
		return "", errNoModel()
	case name == "" || s.cfg.AnyModel || matchModel(name, info):
		return ModelID(info.Path), nil
	}
	return "", s.modelNotFound(name, info, true)
}

func errNoModel() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "model_not_loaded", msg: scheduler.ErrNoModel.Error() + "; load one in Nibble and try again"}
}

func (s *Server) retryAfter() string {
	return strconv.Itoa(max(1, int(s.cfg.RetryAfter.Round(time.Second)/time.Second)))
}
