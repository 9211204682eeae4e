package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"time"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/reasoning"
	"nibble/engine/sample"
	"nibble/engine/scheduler"
)

// apiError is an error reply in OpenAI's shape.
type apiError struct {
	status           int
	msg, param, code string
}

func badRequest(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, msg: msg}
}

// body is the JSON of the error: {"error":{"message","type","param","code"}},
// type invalid_request_error for 4xx and server_error for 5xx, as OpenAI
// does; param and code are null when there is none.
func (e *apiError) body() map[string]any {
	typ := "invalid_request_error"
	if e.status >= 500 {
		typ = "server_error"
	}
	var param, code any
	if e.param != "" {
		param = e.param
	}
	if e.code != "" {
		code = e.code
	}
	return map[string]any{"message": e.msg, "type": typ, "param": param, "code": code}
}

// fail answers with e before any generation.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	s.rejected.Add(1)
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", s.retryAfter())
	}
	writeJSON(w, e.status, map[string]any{"error": e.body()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// Requests.

// common are the fields chat and completion requests share.
type common struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	N                   *int            `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Logprobs            json.RawMessage `json:"logprobs"`
	TopLogprobs         json.RawMessage `json:"top_logprobs"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	// llama-server's extensions.
	TopK          *int     `json:"top_k"`
	MinP          *float64 `json:"min_p"`
	RepeatPenalty *float64 `json:"repeat_penalty"`
	IgnoreEOS     bool     `json:"ignore_eos"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	common
	Messages       []chatMessage   `json:"messages"`
	Tools          json.RawMessage `json:"tools"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	// ReasoningEffort (OpenAI's field; gpt-oss's templates read it) and
	// chat_template_kwargs' enable_thinking (Qwen3's; the field as
	// llama-server and vLLM take it) reach the chat template. A template
	// that does not read them is unaffected.
	ReasoningEffort    *string                    `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
}

type chatMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

type completionRequest struct {
	common
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
}

// readBody reads the request body within the size and time limits.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported on some writers: fine
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	_ = rc.SetReadDeadline(time.Time{}) // a long reply must not time out the connection
	if c, ok := w.(*closeOnRefusal); ok && err == nil {
		c.bodyRead = true // replies after a whole body keep the connection
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
			msg: fmt.Sprintf("the request body is larger than this server's limit of %d bytes", tooBig.Limit)}
	case err != nil:
		return nil, badRequest("", "reading the request body: "+err.Error())
	}
	return body, nil
}

// decode parses a JSON object into v, with messages that say which field
// is wrong and what it should be.
func decode(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request body is empty; send a JSON object")
	}
	err := json.Unmarshal(body, v)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		return badRequest("", fmt.Sprintf("the request body is not valid JSON: %v (at byte %d)", syn, syn.Offset))
	case errors.As(err, &typ) && typ.Field == "":
		return badRequest("", fmt.Sprintf("the request body must be a JSON object, not %s", typ.Value))
	case errors.As(err, &typ):
		field := strings.TrimPrefix(typ.Field, "common.") // the embedded struct
		return badRequest(field, fmt.Sprintf("%s must be %s, not %s", field, kindName(typ.Type), typ.Value))
	}
	return badRequest("", "the request body is not valid JSON: "+err.Error())
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// isAbsent: the raw field was missing or null.
func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// params maps the sampling fields to the engine's. Unset fields keep the
// CLI's defaults (sample.Defaults, as llama-server).
func (c *common) params() (engine.GenParams, *apiError) {
	sp := sample.Defaults()
	if c.N != nil && *c.N != 1 {
		return engine.GenParams{}, badRequest("n", fmt.Sprintf("n must be 1: this server generates one choice per request (got %d)", *c.N))
	}
	type bound struct {
		name   string
		v      *float64
		lo, hi float64
		dst    *float32
	}
	for _, b := range []bound{
		{"temperature", c.Temperature, 0, 2, &sp.Temperature},
		{"top_p", c.TopP, 0, 1, &sp.TopP},
		{"min_p", c.MinP, 0, 1, &sp.MinP},
		{"presence_penalty", c.PresencePenalty, -2, 2, &sp.PresencePenalty},
		{"frequency_penalty", c.FrequencyPenalty, -2, 2, &sp.FrequencyPenalty},
		{"repeat_penalty", c.RepeatPenalty, 0, 10, &sp.RepeatPenalty},
	} {
		if b.v == nil {
			continue
		}
		if *b.v < b.lo || *b.v > b.hi {
			return engine.GenParams{}, badRequest(b.name, fmt.Sprintf("%s must be between %g and %g, got %g", b.name, b.lo, b.hi, *b.v))
		}
		*b.dst = float32(*b.v)
	}
	if c.TopK != nil {
		if *c.TopK < 0 {
			return engine.GenParams{}, badRequest("top_k", fmt.Sprintf("top_k must not be negative, got %d", *c.TopK))
		}
		sp.TopK = *c.TopK
	}
	if c.Seed != nil {
		sp.Seed = uint64(*c.Seed)
	} else {
		sp.Seed = mrand.Uint64()
	}
	maxTokens := 0 // until the end of the turn or the context budget
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", c.MaxTokens}, {"max_completion_tokens", c.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return engine.GenParams{}, badRequest(f.name, fmt.Sprintf("%s must be at least 1, got %d", f.name, *f.v))
		}
		if maxTokens != 0 && maxTokens != *f.v {
			return engine.GenParams{}, badRequest(f.name, fmt.Sprintf("max_tokens (%d) and max_completion_tokens (%d) disagree; send one", maxTokens, *f.v))
		}
		maxTokens = *f.v
	}
	stop, err := parseStop(c.Stop)
	if err != nil {
		return engine.GenParams{}, err
	}
	logprobs := bytes.TrimSpace(c.Logprobs)
	wantLogprobs := !isAbsent(logprobs) && string(logprobs) != "false" && string(logprobs) != "0"
	if !isAbsent(c.TopLogprobs) && !wantLogprobs {
		// OpenAI refuses it too: top_logprobs only sizes the logprobs asked for.
		return engine.GenParams{}, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	}
	if wantLogprobs {
		return engine.GenParams{}, badRequest("logprobs", "logprobs are not supported by this server")
	}
	if raw := bytes.TrimSpace(c.LogitBias); !isAbsent(raw) && string(raw) != "{}" {
		return engine.GenParams{}, badRequest("logit_bias", "logit_bias is not supported by this server")
	}
	return engine.GenParams{MaxTokens: maxTokens, Sample: sp, Stop: stop, IgnoreEOS: c.IgnoreEOS}, nil
}

// maxStops bounds the stop strings (OpenAI allows 4; llama-server more).
const maxStops = 16

func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isAbsent(raw) {
		return nil, nil
	}
	var list []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) > maxStops {
		return nil, badRequest("stop", fmt.Sprintf("at most %d stop strings, got %d", maxStops, len(out)))
	}
	return out, nil
}

// messages checks the conversation and converts it for the engine.
func (req *chatRequest) messages() ([]chat.Message, *apiError) {
	if req.Messages == nil {
		return nil, badRequest("messages", "messages is required: an array of {\"role\", \"content\"} objects")
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	out := make([]chat.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		if m.Role == nil {
			return nil, badRequest(at+".role", at+".role is required")
		}
		role := *m.Role
		switch role {
		case "system", "user", "assistant":
		case "developer": // OpenAI's newer name for system
			role = "system"
		default:
			return nil, badRequest(at+".role", fmt.Sprintf("%s.role %q is not supported: use system, developer, user or assistant (tool messages are not supported)", at, role))
		}
		content, err := messageContent(m.Content, role, at)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: content})
	}
	if !isAbsent(req.Tools) && string(bytes.TrimSpace(req.Tools)) != "[]" {
		return nil, badRequest("tools", "tools (function calling) are not supported by this server")
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, badRequest("response_format", fmt.Sprintf("response_format %q is not supported: this server returns text", rf.Type))
	}
	return out, nil
}

// messageContent is a message's text: a string, or text parts joined by
// newlines. An assistant turn may have null content.
func messageContent(raw json.RawMessage, role, at string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if isAbsent(raw) {
		if role == "assistant" {
			return "", nil
		}
		return "", badRequest(at+".content", at+".content is required")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badRequest(at+".content", at+".content is not a valid string")
		}
		return s, nil
	case '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", badRequest(at+".content", at+`.content parts must be objects like {"type": "text", "text": "..."}`)
		}
		texts := make([]string, 0, len(parts))
		for j, p := range parts {
			pat := fmt.Sprintf("%s.content[%d]", at, j)
			if p.Type != "text" {
				return "", badRequest(pat+".type", fmt.Sprintf("%s: only text content is supported, not %q", pat, p.Type))
			}
			if p.Text == nil {
				return "", badRequest(pat+".text", pat+".text is required")
			}
			texts = append(texts, *p.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", badRequest(at+".content", at+".content must be a string or an array of text parts")
}

// prompt is a completion request's text: a string or an array of one.
func (req *completionRequest) prompt() (string, *apiError) {
	var p string
	switch raw := bytes.TrimSpace(req.Prompt); {
	case isAbsent(raw):
		return "", badRequest("prompt", "prompt is required")
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", badRequest("prompt", "prompt is not a valid string")
		}
	case raw[0] == '[':
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return "", badRequest("prompt", "prompt must be a string (token-id prompts are not supported)")
		}
		if len(list) != 1 {
			return "", badRequest("prompt", fmt.Sprintf("a prompt array must hold exactly one string (one completion per request), got %d", len(list)))
		}
		p = list[0]
	default:
		return "", badRequest("prompt", "prompt must be a string")
	}
	switch {
	case p == "":
		return "", badRequest("prompt", "prompt must not be empty")
	case req.Echo:
		return "", badRequest("echo", "echo is not supported by this server")
	case req.Suffix != nil && *req.Suffix != "":
		return "", badRequest("suffix", "suffix (fill-in-the-middle) is not supported by this server")
	case req.BestOf != nil && *req.BestOf != 1:
		return "", badRequest("best_of", "best_of must be 1")
	}
	return p, nil
}

// Handlers.

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	var req chatRequest
	if e := decode(body, &req); e != nil {
		s.fail(w, e)
		return
	}
	msgs, e := req.messages()
	if e != nil {
		s.fail(w, e)
		return
	}
	sr := scheduler.Request{Messages: msgs}
	if e := req.thinking(&sr); e != nil {
		s.fail(w, e)
		return
	}
	s.generate(w, r, &req.common, true, sr)
}

// thinking checks the fields that turn reasoning down or off and puts them
// on r: reasoning_effort (or chat_template_kwargs.reasoning_effort) and
// chat_template_kwargs.enable_thinking. Other kwargs are ignored.
func (req *chatRequest) thinking(r *scheduler.Request) *apiError {
	effort := req.ReasoningEffort
	if raw, ok := req.ChatTemplateKwargs["reasoning_effort"]; ok && !isAbsent(raw) {
		var e string
		if json.Unmarshal(raw, &e) != nil {
			return badRequest("chat_template_kwargs.reasoning_effort", "chat_template_kwargs.reasoning_effort must be a string")
		}
		if effort != nil && *effort != e {
			return badRequest("reasoning_effort", fmt.Sprintf("reasoning_effort (%q) and chat_template_kwargs.reasoning_effort (%q) disagree; send one", *effort, e))
		}
		effort = &e
	}
	if effort != nil {
		if !reasoning.ValidEffort(*effort) {
			return badRequest("reasoning_effort", fmt.Sprintf("reasoning_effort must be one of %s, got %q", strings.Join(reasoning.Efforts, ", "), *effort))
		}
		r.ReasoningEffort = *effort
	}
	if raw, ok := req.ChatTemplateKwargs["enable_thinking"]; ok && !isAbsent(raw) {
		var on bool
		if json.Unmarshal(raw, &on) != nil {
			return badRequest("chat_template_kwargs.enable_thinking", fmt.Sprintf("chat_template_kwargs.enable_thinking must be true or false, not %s", raw))
		}
		r.EnableThinking = &on
	}
	return nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	body, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	var req completionRequest
	if e := decode(body, &req); e != nil {
		s.fail(w, e)
		return
	}
	p, e := req.prompt()
	if e != nil {
		s.fail(w, e)
		return
	}
	s.generate(w, r, &req.common, false, scheduler.Request{Prompt: p})
}

// Replies.

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(res *scheduler.Result) *usage {
	u := &usage{PromptTokens: res.PromptTokens, CompletionTokens: res.GenTokens, TotalTokens: res.PromptTokens + res.GenTokens}
	u.PromptTokensDetails.CachedTokens = res.ReusedTokens
	return u
}

type message struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the model's thinking, split from the answer, as
	// llama-server returns it; left out when there is none.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      *message  `json:"message,omitempty"` // chat
	Delta        *message  `json:"delta,omitempty"`   // chat, streamed
	Text         *string   `json:"text,omitempty"`    // completion
	Logprobs     *struct{} `json:"logprobs"`          // always null
	FinishReason *string   `json:"finish_reason"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   any      `json:"usage,omitempty"`
}

// reply builds one request's response objects.
type reply struct {
	chat         bool
	id, model    string
	created      int64
	includeUsage bool
}

func (rp *reply) object(streamed bool) string {
	switch {
	case rp.chat && streamed:
		return "chat.completion.chunk"
	case rp.chat:
		return "chat.completion"
	}
	return "text_completion"
}

// chunk is a streamed piece: text and reasoning, or the end (finish != "").
func (rp *reply) chunk(text, reasoning string, role bool, finish string) completion {
	c := choice{}
	if rp.chat {
		c.Delta = &message{}
		if role {
			c.Delta.Role = "assistant"
		}
		if role || text != "" {
			c.Delta.Content = &text
		}
		if reasoning != "" {
			c.Delta.ReasoningContent = &reasoning
		}
	} else {
		c.Text = &text
	}
	if finish != "" {
		c.FinishReason = &finish
	}
	out := completion{ID: rp.id, Object: rp.object(true), Created: rp.created, Model: rp.model, Choices: []choice{c}}
	if rp.includeUsage { // every chunk but the last has "usage": null
		out.Usage = json.RawMessage("null")
	}
	return out
}

func (rp *reply) usageChunk(res *scheduler.Result) completion {
	return completion{ID: rp.id, Object: rp.object(true), Created: rp.created, Model: rp.model, Choices: []choice{}, Usage: usageOf(res)}
}

func (rp *reply) full(res *scheduler.Result) completion {
	text, finish := res.Text, string(res.FinishReason)
	c := choice{FinishReason: &finish}
	if rp.chat {
		c.Message = &message{Role: "assistant", Content: &text}
		if res.Reasoning != "" {
			c.Message.ReasoningContent = &res.Reasoning
		}
	} else {
		c.Text = &text
	}
	return completion{ID: rp.id, Object: rp.object(false), Created: rp.created, Model: rp.model, Choices: []choice{c}, Usage: usageOf(res)}
}

// generate runs the request on the scheduler and answers, streamed or not.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, c *common, isChat bool, req scheduler.Request) {
	params, e := c.params()
	if e != nil {
		s.fail(w, e)
		return
	}
	req.Params = params
	model, e := s.resolveModel(c.Model)
	if e != nil {
		s.fail(w, e)
		return
	}
	prefix := "cmpl-"
	if isChat {
		prefix = "chatcmpl-"
	}
	rp := &reply{chat: isChat, id: prefix + rand.Text(), model: model, created: time.Now().Unix(),
		includeUsage: c.Stream && c.StreamOptions != nil && c.StreamOptions.IncludeUsage}

	// The client's going away (r.Context) cancels the generation, and so
	// does a failed write.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, err := s.sched.Submit(ctx, req)
	if err != nil {
		s.fail(w, submitError(err, isChat))
		return
	}
	s.requests.Add(1)
	s.active.Add(1)
	if c.Stream {
		s.stream(w, cancel, events, rp)
		return
	}
	res := collect(events, nil)
	s.record(res)
	if !finished(res) {
		e := generationError(res)
		writeJSON(w, e.status, map[string]any{"error": e.body()}) // fails quietly if the client is gone
		return
	}
	writeJSON(w, http.StatusOK, rp.full(res))
}

func (s *Server) stream(w http.ResponseWriter, cancel context.CancelFunc, events <-chan scheduler.Event, rp *reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var werr error
	write := func(data []byte) {
		if werr != nil {
			return
		}
		if _, werr = fmt.Fprintf(w, "data: %s\n\n", data); werr == nil {
			werr = rc.Flush()
		}
		if werr != nil {
			cancel() // nobody is reading: stop generating
		}
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		write(b)
	}
	if rp.chat {
		send(rp.chunk("", "", true, ""))
	}
	res := collect(events, func(text, reasoning string) { send(rp.chunk(text, reasoning, false, "")) })
	s.record(res)
	if !finished(res) {
		// No [DONE]: the reply did not complete. OpenAI's SDKs raise this.
		send(map[string]any{"error": generationError(res).body()})
		return
	}
	send(rp.chunk("", "", false, string(res.FinishReason)))
	if rp.includeUsage {
		send(rp.usageChunk(res))
	}
	write([]byte("[DONE]"))
}

// collect reads a request's events to the end, passing text and
// reasoning on.
func collect(events <-chan scheduler.Event, onText func(text, reasoning string)) *scheduler.Result {
	var res *scheduler.Result
	for e := range events {
		switch e.Kind {
		case scheduler.Delta:
			if (e.Text != "" || e.Reasoning != "") && onText != nil {
				onText(e.Text, e.Reasoning)
			}
		case scheduler.Final:
			res = e.Result
		}
	}
	if res == nil { // closed without a final event: cancelled and not read in time
		res = &scheduler.Result{FinishReason: engine.StopCancelled, Err: context.Canceled}
	}
	return res
}

func finished(res *scheduler.Result) bool {
	return res.FinishReason == engine.StopString || res.FinishReason == engine.StopMaxTokens
}

func (s *Server) record(res *scheduler.Result) {
	s.active.Add(-1)
	s.promptTokens.Add(int64(res.PromptTokens))
	s.completionTokens.Add(int64(res.GenTokens))
	switch {
	case finished(res):
		s.completed.Add(1)
	case res.FinishReason == engine.StopCancelled:
		s.cancelled.Add(1)
		s.cancelledTokens.Add(int64(res.GenTokens))
	default:
		s.failed.Add(1)
	}
}

// submitError maps the scheduler's refusals.
func submitError(err error, isChat bool) *apiError {
	input := "prompt"
	if isChat {
		input = "messages"
	}
	switch {
	case errors.Is(err, scheduler.ErrBusy):
		return &apiError{status: http.StatusTooManyRequests, code: "rate_limit_exceeded", msg: err.Error()}
	case errors.Is(err, scheduler.ErrNoModel):
		return errNoModel()
	case errors.Is(err, scheduler.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: "server_shutting_down", msg: err.Error()}
	case errors.Is(err, engine.ErrContextFull):
		return &apiError{status: http.StatusBadRequest, code: "context_length_exceeded", param: input,
			msg: err.Error() + " (lower max_tokens, or restart the server with a larger --ctx)"}
	case strings.HasPrefix(err.Error(), "chat template:"), err.Error() == "empty prompt":
		return badRequest(input, err.Error())
	}
	return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
}

// generationError describes a generation that ended without completing.
func generationError(res *scheduler.Result) *apiError {
	why := "cancelled"
	if res.Err != nil {
		why = res.Err.Error()
	}
	switch {
	case res.FinishReason != engine.StopCancelled:
		return &apiError{status: http.StatusInternalServerError, code: "generation_failed", msg: "the generation failed: " + why}
	case errors.Is(res.Err, scheduler.ErrUnloaded):
		return &apiError{status: http.StatusServiceUnavailable, code: "model_unloaded", msg: "the generation was stopped: " + why}
	case errors.Is(res.Err, scheduler.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: "server_shutting_down", msg: "the generation was stopped: " + why}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: "generation_cancelled", msg: "the generation was cancelled: " + why}
}
