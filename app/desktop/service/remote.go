package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"nibble/app/documents/retrieve"
	"nibble/app/remote"
	"nibble/app/settings"
	"nibble/engine"
	"nibble/engine/reasoning"
	"nibble/engine/scheduler"
)

// Remote models: an OpenAI-compatible endpoint from the settings can be
// the model chats go to. The local model stays loaded meanwhile (the
// memory it takes is the user's choice); loading a local model makes it
// the one chats go to again.

// DefaultRemoteContext is the context assumed for a remote model whose
// endpoint sets none and whose server does not say.
const DefaultRemoteContext = 8192

// remoteBytesPerToken is the approximate counter's rate: no tokenizer is
// at hand for a remote model, and BPE vocabularies average about four
// bytes of English per token, so three overestimates for most text.
const remoteBytesPerToken = 3

// remoteContextMargin is the share of a remote model's context that the
// document planner is told about, for what the approximation may miss.
const remoteContextMargin = 0.9

// RemoteEndpoint is a configured endpoint as the window sees it: never
// the key, only whether there is one.
type RemoteEndpoint struct {
	Name          string `json:"name"`
	URL           string `json:"url"`
	Model         string `json:"model"`
	ContextTokens int    `json:"contextTokens"` // 0: from the server, else DefaultRemoteContext
	HasKey        bool   `json:"hasKey"`
	Active        bool   `json:"active"` // chats go to it
}

// RemoteEndpointInput is what the window sends to add or replace an
// endpoint.
type RemoteEndpointInput struct {
	Name          string `json:"name"`
	URL           string `json:"url"`
	Key           string `json:"key"`
	Model         string `json:"model"`
	ContextTokens int    `json:"contextTokens"`
}

// RemoteModel is one model a server lists.
type RemoteModel struct {
	ID            string `json:"id"`
	ContextTokens int    `json:"contextTokens"` // 0: the server does not say
}

// remotes is the remote models' part: the endpoints of the settings, what
// their servers said about their models' context, and a client per
// endpoint, so that replies reuse its connections.
type remotes struct {
	env
	// modelsChanged sends the list of local models (which one chats go to
	// shows there).
	modelsChanged func()

	mu      sync.Mutex                // guards ctx and clients
	ctx     map[string]int            // "<url>\x00<model>" → context the server reported
	clients map[string]*remote.Client // "<url>\x00<key>" → its client
}

// maxRemoteClients bounds the clients kept; past it (endpoints edited
// many times) they are dropped and made again as needed.
const maxRemoteClients = 16

func remoteCtxKey(url, model string) string { return url + "\x00" + model }

// client is the client of ep: the one made before for its URL and
// key, so that its idle connections serve the next reply, else a new one.
func (r *remotes) client(ep settings.RemoteEndpoint) (*remote.Client, error) {
	k := strings.TrimSpace(ep.URL) + "\x00" + strings.TrimSpace(ep.Key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[k]; ok {
		return c, nil
	}
	c, err := remote.New(ep.URL, ep.Key, remote.Options{})
	if err != nil {
		if ep.Name == "" {
			return nil, fmt.Errorf("remote endpoint: %w", err)
		}
		return nil, fmt.Errorf("remote %q: %w", ep.Name, err)
	}
	if r.clients == nil || len(r.clients) >= maxRemoteClients {
		r.closeClientsLocked()
		r.clients = map[string]*remote.Client{}
	}
	r.clients[k] = c
	return c, nil
}

// closeClients closes the remote clients' idle connections and
// forgets the clients (Close).
func (r *remotes) closeClients() {
	r.mu.Lock()
	r.closeClientsLocked()
	r.mu.Unlock()
}

func (r *remotes) closeClientsLocked() {
	for _, c := range r.clients {
		c.CloseIdleConnections() // a reply in progress keeps its own
	}
	r.clients = nil
}

// active is the endpoint chats go to, if one is chosen.
func (r *remotes) active() (settings.RemoteEndpoint, bool) {
	c := r.store.Get()
	if c.ActiveRemote == "" {
		return settings.RemoteEndpoint{}, false
	}
	return c.FindRemote(c.ActiveRemote)
}

// contextOf is the remote model's context: the endpoint's setting,
// else what its server reported, else DefaultRemoteContext.
func (r *remotes) contextOf(ep settings.RemoteEndpoint) int {
	if ep.ContextTokens > 0 {
		return ep.ContextTokens
	}
	base, err := remote.NormalizeURL(ep.URL)
	if err == nil {
		r.mu.Lock()
		n := r.ctx[remoteCtxKey(base, ep.Model)]
		r.mu.Unlock()
		if n > 0 {
			return n
		}
	}
	return DefaultRemoteContext
}

// approxTokens is the approximate count used for remote models.
func approxTokens(text string) int {
	if text == "" {
		return 0
	}
	return (len(text) + remoteBytesPerToken - 1) / remoteBytesPerToken
}

// tokenCounter counts for a remote model, which has no tokenizer
// here: remoteBytesPerToken bytes a token, rounded up, and a context
// remoteContextMargin of the model's.
func (r *remotes) tokenCounter(ep settings.RemoteEndpoint) (retrieve.TokenCounter, int, error) {
	return approxTokens, int(float64(r.contextOf(ep)) * remoteContextMargin), nil
}

// remoteMessages are r's messages for an OpenAI-compatible server (a plain
// completion becomes one user message).
func remoteMessages(r scheduler.Request) []remote.Message {
	if len(r.Messages) == 0 {
		return []remote.Message{{Role: "user", Content: r.Prompt}}
	}
	out := make([]remote.Message, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = remote.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// submit starts req on ep. The connection is made here, so that an
// endpoint that cannot be reached, a refused key or a missing model fail
// Send at once; the reply then streams as the scheduler's would: deltas,
// and one final event with the server's token counts and the timing.
func (r *remotes) submit(ctx context.Context, ep settings.RemoteEndpoint, req scheduler.Request) (<-chan scheduler.Event, error) {
	c, err := r.client(ep)
	if err != nil {
		return nil, err
	}
	sp := req.Params.Sample
	temp, topP := sp.Temperature, sp.TopP
	cr := remote.ChatRequest{Model: ep.Model, Messages: remoteMessages(req), Temperature: &temp, MaxTokens: req.Params.MaxTokens, Stop: req.Params.Stop}
	if topP > 0 && topP < 1 {
		cr.TopP = &topP
	}
	start := time.Now()
	stream, err := c.Chat(ctx, cr)
	if err != nil {
		return nil, fmt.Errorf("remote model %q: %w", ep.Name, err)
	}
	events := make(chan scheduler.Event, 16)
	go func() {
		defer close(events)
		defer stream.Close()
		res := &scheduler.Result{}
		var text strings.Builder
		var first, last time.Time
		var thinking strings.Builder
		// A server without a reasoning parser leaves the think block in the
		// content: it is split off here as the server's own would be.
		inline := reasoning.New(reasoning.Think, "")
		deliver := func(p reasoning.Part) {
			if p.Content == "" && p.Reasoning == "" {
				return
			}
			text.WriteString(p.Content)
			thinking.WriteString(p.Reasoning)
			events <- scheduler.Event{Kind: scheduler.Delta, Text: p.Content, Reasoning: p.Reasoning, Token: -1}
		}
		for {
			piece, err := stream.NextPiece()
			if err != nil {
				switch {
				case errors.Is(err, io.EOF):
					res.FinishReason = finishOf(stream.FinishReason())
				case errors.Is(err, context.Canceled):
					res.FinishReason, res.Err = engine.StopCancelled, err
				default:
					res.FinishReason, res.Err = engine.StopError, fmt.Errorf("remote model %q: %w", ep.Name, err)
				}
				break
			}
			if piece == (remote.Piece{}) {
				continue
			}
			last = time.Now()
			if first.IsZero() {
				first = last
			}
			p := inline.Push(piece.Text)
			p.Reasoning = piece.Reasoning + p.Reasoning
			deliver(p)
		}
		deliver(inline.Flush())
		res.Text, res.Reasoning, res.StopReason = text.String(), thinking.String(), res.FinishReason
		if u := stream.Usage(); u != nil {
			res.PromptTokens, res.GenTokens = u.PromptTokens, u.CompletionTokens
		}
		if !first.IsZero() {
			res.TimeToFirstToken = first.Sub(start)
			if d := last.Sub(first).Seconds(); d > 0 && res.GenTokens > 1 {
				res.DecodeTokPerSec = float64(res.GenTokens-1) / d
			}
		}
		if tm := stream.Timings(); tm != nil {
			res.PrefillTokPerSec = tm.PromptPerSecond
			if tm.PredictedPerSecond > 0 {
				res.DecodeTokPerSec = tm.PredictedPerSecond
			}
		}
		events <- scheduler.Event{Kind: scheduler.Final, Result: res}
	}()
	return events, nil
}

// finishOf maps a server's finish reason onto the app's stop or length.
func finishOf(reason string) engine.StopReason {
	if reason == "length" {
		return engine.StopMaxTokens
	}
	return engine.StopString // "stop", "eos", "content_filter", "tool_calls", or none given
}

// modelInfo is the Model that Status shows for ep.
func (r *remotes) modelInfo(ep settings.RemoteEndpoint) Model {
	host := ep.URL
	if c, err := r.client(ep); err == nil {
		host = c.Host()
	}
	return Model{Name: ep.Name, Path: settings.RemotePrefix + ep.Name, Backend: "remote", Ctx: r.contextOf(ep),
		Remote: true, Host: host, RemoteModel: ep.Model}
}

// endpoints lists the configured endpoints (without their keys).
func (r *remotes) endpoints() []RemoteEndpoint {
	c := r.store.Get()
	out := make([]RemoteEndpoint, 0, len(c.RemoteEndpoints))
	for _, e := range c.RemoteEndpoints {
		out = append(out, RemoteEndpoint{Name: e.Name, URL: e.URL, Model: e.Model, ContextTokens: e.ContextTokens,
			HasKey: e.Key != "", Active: strings.EqualFold(e.Name, c.ActiveRemote)})
	}
	return out
}

// models connects to an endpoint and lists its models (the
// window's "Connect"). An empty key with the name of a configured
// endpoint uses that endpoint's key, so a window that never saw the key
// can list its models.
func (r *remotes) models(in RemoteEndpointInput) ([]RemoteModel, error) {
	return r.listModels(r.fillKey(in))
}

// listModels lists ep's models and remembers the context each
// reports.
func (r *remotes) listModels(ep settings.RemoteEndpoint) ([]RemoteModel, error) {
	c, err := r.client(ep)
	if err != nil {
		return nil, err
	}
	list, err := c.Models(context.Background())
	if err != nil {
		return nil, err
	}
	out := make([]RemoteModel, len(list))
	r.mu.Lock()
	if r.ctx == nil {
		r.ctx = map[string]int{}
	}
	for i, m := range list {
		out[i] = RemoteModel{ID: m.ID, ContextTokens: m.ContextTokens}
		if m.ContextTokens > 0 {
			r.ctx[remoteCtxKey(c.Base(), m.ID)] = m.ContextTokens
		}
	}
	if len(list) == 1 && list[0].ContextTokens > 0 {
		// A server with one model answers requests that name none with it.
		r.ctx[remoteCtxKey(c.Base(), "")] = list[0].ContextTokens
	}
	r.mu.Unlock()
	return out, nil
}

// fillKey is in as a settings endpoint, with the stored key when in
// leaves it empty and names a configured endpoint at the same URL.
func (r *remotes) fillKey(in RemoteEndpointInput) settings.RemoteEndpoint {
	ep := settings.RemoteEndpoint{Name: strings.TrimSpace(in.Name), URL: strings.TrimSpace(in.URL), Key: strings.TrimSpace(in.Key),
		Model: strings.TrimSpace(in.Model), ContextTokens: in.ContextTokens}
	if ep.Key == "" {
		if old, ok := r.store.Get().FindRemote(ep.Name); ok && sameURL(old.URL, ep.URL) {
			ep.Key = old.Key
		}
	}
	return ep
}

func sameURL(a, b string) bool {
	na, ea := remote.NormalizeURL(a)
	nb, eb := remote.NormalizeURL(b)
	return ea == nil && eb == nil && na == nb
}

// save adds an endpoint, or replaces the one of the same
// name (keeping its key when in.Key is empty and the URL is the same).
// The settings' checks apply: a name, an http or https URL.
func (r *remotes) save(in RemoteEndpointInput) ([]RemoteEndpoint, error) {
	ep := r.fillKey(in)
	if ep.URL != "" {
		if base, err := remote.NormalizeURL(ep.URL); err == nil {
			ep.URL = base
		}
	}
	err := r.store.Update(func(c *settings.Settings) error {
		i := 0
		for ; i < len(c.RemoteEndpoints); i++ {
			if strings.EqualFold(c.RemoteEndpoints[i].Name, ep.Name) {
				break
			}
		}
		if i == len(c.RemoteEndpoints) {
			c.RemoteEndpoints = append(c.RemoteEndpoints, ep)
		} else {
			if strings.EqualFold(c.ActiveRemote, c.RemoteEndpoints[i].Name) {
				c.ActiveRemote = ep.Name
			}
			c.RemoteEndpoints[i] = ep
		}
		return c.Validate()
	})
	if err != nil {
		return r.endpoints(), remoteSettingsError(err)
	}
	r.closeClients() // none keeps a replaced key
	r.statusChanged()
	return r.endpoints(), nil
}

// remoteSettingsError puts a validation error in the form's words: an
// endpoint's field by its name alone ("context tokens: ...").
func remoteSettingsError(err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap() // Validate's *settings.FieldError, joined
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
		var fe *settings.FieldError
		if errors.As(e, &fe) && strings.HasPrefix(fe.Field, "remoteEndpoints[") {
			if _, field, ok := strings.Cut(fe.Field, "]."); ok {
				lines[i] = fieldWords(field) + ": " + fe.Msg
			}
		}
	}
	return errors.New(strings.Join(lines, "\n"))
}

// remove forgets an endpoint (and its key); if chats went
// to it, they go to the local model again.
func (r *remotes) remove(name string) ([]RemoteEndpoint, error) {
	err := r.store.Update(func(c *settings.Settings) error {
		for i, e := range c.RemoteEndpoints {
			if strings.EqualFold(e.Name, name) {
				c.RemoteEndpoints = append(c.RemoteEndpoints[:i], c.RemoteEndpoints[i+1:]...)
				if strings.EqualFold(c.ActiveRemote, name) {
					c.ActiveRemote = ""
				}
				return nil
			}
		}
		return fmt.Errorf("no remote endpoint is called %q", name)
	})
	if err == nil {
		r.closeClients() // nor the removed endpoint's key
		r.statusChanged()
		r.modelsChanged()
	}
	return r.endpoints(), err
}

// use makes the endpoint called name the model chats go to, after
// checking that it answers and has the model (its reported context is
// remembered for the document planner). "" goes back to the local model.
// The local model stays loaded.
func (r *remotes) use(name string) (Status, error) {
	if name != "" {
		ep, ok := r.store.Get().FindRemote(name)
		if !ok {
			return r.status(), fmt.Errorf("no remote endpoint is called %q", name)
		}
		models, err := r.listModels(ep)
		if err != nil {
			return r.status(), fmt.Errorf("remote model %q: %w", ep.Name, err)
		}
		if ep.Model != "" && !hasRemoteModel(models, ep.Model) {
			ids := make([]string, len(models))
			for i, m := range models {
				ids[i] = m.ID
			}
			return r.status(), fmt.Errorf("remote model %q: the server at %s has no model %q (it lists: %s)", ep.Name, ep.URL, ep.Model, strings.Join(ids, ", "))
		}
		name = ep.Name
	}
	if err := r.store.Update(func(c *settings.Settings) error {
		c.ActiveRemote = name
		return c.Validate()
	}); err != nil {
		return r.status(), err
	}
	r.statusChanged()
	r.modelsChanged()
	return r.status(), nil
}

func hasRemoteModel(models []RemoteModel, id string) bool {
	for _, m := range models {
		if m.ID == id {
			return true
		}
	}
	return false
}

// target says where chats go, for Diagnostics (never the key);
// localLoaded says whether a local model is loaded.
func (r *remotes) target(localLoaded bool) string {
	if ep, ok := r.active(); ok {
		model := ep.Model
		if model == "" {
			model = "the server's default model"
		}
		base, err := remote.NormalizeURL(ep.URL)
		if err != nil {
			base = ep.URL
		}
		key := "no key"
		if ep.Key != "" {
			key = "with an API key"
		}
		return fmt.Sprintf("remote endpoint %q: %s/chat/completions, %s, %s", ep.Name, base, model, key)
	}
	if localLoaded {
		return "the local model, on this machine"
	}
	return "nowhere: no model is loaded and no remote model is chosen"
}

// withoutKeys is c with every remote endpoint's key blanked.
func withoutKeys(c settings.Settings) settings.Settings {
	for i := range c.RemoteEndpoints {
		c.RemoteEndpoints[i].Key = ""
	}
	return c
}

// fieldWords spells a camelCase settings key as words: "contextTokens" is
// "context tokens".
func fieldWords(key string) string {
	var b strings.Builder
	for _, r := range key {
		if unicode.IsUpper(r) {
			b.WriteByte(' ')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
