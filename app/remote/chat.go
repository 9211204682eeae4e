package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is what Chat sends. Only OpenAI's own sampling fields are
// sent (some servers refuse fields they do not know); nil ones are left
// to the server.
type ChatRequest struct {
	Model       string
	Messages    []Message
	Temperature *float32
	TopP        *float32
	MaxTokens   int // 0: the server's default
	Stop        []string
}

// Usage is the token counts a server reports at the end of a reply.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Timings are llama-server's own measurements, when it sends them.
type Timings struct {
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

// Stream is a reply being streamed. Next returns its text piece by piece;
// Close (or cancelling the context given to Chat) closes the connection,
// which stops the server's generation.
type Stream struct {
	c       *Client
	body    io.ReadCloser
	events  *sseReader
	stall   *time.Timer
	stalled atomic.Bool // the stall timer fired
	cancel  context.CancelFunc
	ctx     context.Context

	// Complete replies a non-streamed answer (a server that ignored
	// "stream": true) as one piece.
	whole *Piece

	done         bool
	finishReason string
	usage        *Usage
	timings      *Timings

	closeOnce sync.Once
}

// Chat starts a streamed chat reply. It returns once the server has
// answered with a stream; a server that cannot be reached, refuses the
// key, lacks the model or does not speak the protocol is an error here.
func (c *Client) Chat(ctx context.Context, r ChatRequest) (*Stream, error) {
	const what = "chat"
	body := map[string]any{
		"messages":       r.Messages,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if r.Model != "" {
		body["model"] = r.Model
	}
	if r.Temperature != nil {
		body["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		body["top_p"] = *r.TopP
	}
	if r.MaxTokens > 0 {
		body["max_tokens"] = r.MaxTokens
	}
	if len(r.Stop) > 0 {
		body["stop"] = r.Stop
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("chat request: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(data))
	if err != nil {
		cancel()
		return nil, &Error{Kind: NotCompatible, Endpoint: c.base, Message: what, Err: err}
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		err = c.transportError(ctx, what, err)
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		errBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		cancel()
		return nil, statusError(c.base, what, resp.StatusCode, errBody, r.Model)
	}
	s := &Stream{c: c, body: resp.Body, cancel: cancel, ctx: ctx}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		// The server ignored "stream": the whole reply in one answer.
		defer s.Close()
		p, err := s.readWhole()
		if err != nil {
			return nil, err
		}
		s.whole = &p
		return s, nil
	}
	s.events = newSSEReader(resp.Body, c.opts.MaxEventBytes, c.opts.MaxStreamBytes)
	s.stall = time.AfterFunc(c.opts.StallTimeout, func() { s.stalled.Store(true); cancel() })
	return s, nil
}

// readWhole reads a non-streamed chat completion.
func (s *Stream) readWhole() (Piece, error) {
	body, err := io.ReadAll(io.LimitReader(s.body, s.c.opts.MaxStreamBytes+1))
	if err != nil {
		return Piece{}, s.cutError(err)
	}
	if int64(len(body)) > s.c.opts.MaxStreamBytes {
		return Piece{}, &Error{Kind: TooLarge, Endpoint: s.c.base, Message: fmt.Sprintf("chat: the reply is larger than %d bytes", s.c.opts.MaxStreamBytes)}
	}
	if se, ok := parseServerError(body); ok {
		return Piece{}, &Error{Kind: ServerError, Endpoint: s.c.base, Status: http.StatusOK, Message: "chat: the server reported an error: " + se.String()}
	}
	var doc struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				reasoningFields
			} `json:"message"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage   *Usage   `json:"usage"`
		Timings *Timings `json:"timings"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Choices) == 0 || doc.Choices[0].Message.Content == nil {
		return Piece{}, &Error{Kind: NotCompatible, Endpoint: s.c.base, Status: http.StatusOK,
			Message: "chat: the answer is neither a stream nor an OpenAI-compatible chat completion"}
	}
	s.done, s.usage, s.timings = true, doc.Usage, doc.Timings
	if fr := doc.Choices[0].FinishReason; fr != nil {
		s.finishReason = *fr
	}
	m := doc.Choices[0].Message
	return Piece{Text: *m.Content, Reasoning: m.reasoning()}, nil
}

// Piece is a piece of a reply: answer text, and a reasoning model's
// thinking apart from it (when the server splits it out).
type Piece struct {
	Text, Reasoning string
}

// reasoningFields are where servers put a reasoning model's thinking:
// reasoning_content (llama-server, vLLM, DeepSeek's API) or reasoning
// (Ollama, OpenRouter).
type reasoningFields struct {
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

func (r reasoningFields) reasoning() string {
	switch {
	case r.ReasoningContent != nil:
		return *r.ReasoningContent
	case r.Reasoning != nil:
		return *r.Reasoning
	}
	return ""
}

// chunk is the part of a chat.completion.chunk the client reads.
type chunk struct {
	Choices *[]struct {
		Delta struct {
			Content *string `json:"content"`
			reasoningFields
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *Usage   `json:"usage"`
	Timings *Timings `json:"timings"`
}

// Next returns the next piece of the reply's text, skipping its
// reasoning (NextPiece has both).
func (s *Stream) Next() (string, error) {
	for {
		p, err := s.NextPiece()
		if err != nil || p.Text != "" {
			return p.Text, err
		}
	}
}

// NextPiece returns the next piece of the reply: text, reasoning or both.
// At the end of a complete reply it returns io.EOF; FinishReason and Usage
// are then set. A stream that ends early, stalls, carries an error or
// something that is not a chunk returns an *Error; a cancelled context
// returns an error wrapping context.Canceled.
func (s *Stream) NextPiece() (Piece, error) {
	if s.whole != nil {
		p := *s.whole
		s.whole = nil
		if p != (Piece{}) {
			return p, nil
		}
	}
	for !s.done {
		if s.events == nil {
			break
		}
		ev, err := s.events.next()
		if err != nil {
			return Piece{}, s.readError(err)
		}
		s.stall.Reset(s.c.opts.StallTimeout)
		p, err := s.handle(ev)
		if err != nil {
			s.Close()
			return Piece{}, err
		}
		if p != (Piece{}) {
			return p, nil
		}
	}
	s.Close()
	return Piece{}, io.EOF
}

// handle interprets one event: a piece to return, the end, or an error.
func (s *Stream) handle(ev sseEvent) (Piece, error) {
	data := strings.TrimSpace(ev.data)
	if ev.errorField || ev.name == "error" {
		msg := clip(data, 300)
		if se, ok := parseServerError([]byte(data)); ok {
			msg = se.String()
		} else if se, ok := bareServerError([]byte(data)); ok {
			msg = se.String()
		}
		return Piece{}, &Error{Kind: ServerError, Endpoint: s.c.base, Status: http.StatusOK, Message: "chat: the server stopped the reply with an error: " + msg}
	}
	if data == "[DONE]" {
		s.done = true
		return Piece{}, nil
	}
	if se, ok := parseServerError([]byte(data)); ok {
		return Piece{}, &Error{Kind: ServerError, Endpoint: s.c.base, Status: http.StatusOK, Message: "chat: the server stopped the reply with an error: " + se.String()}
	}
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil || (c.Choices == nil && c.Usage == nil) {
		return Piece{}, &Error{Kind: NotCompatible, Endpoint: s.c.base, Status: http.StatusOK,
			Message: fmt.Sprintf("chat: the stream holds %q, which is not an OpenAI-compatible chunk", clip(data, 80))}
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	if c.Timings != nil {
		s.timings = c.Timings
	}
	var p Piece
	if c.Choices != nil && len(*c.Choices) > 0 {
		ch := (*c.Choices)[0]
		if ch.Delta.Content != nil {
			p.Text = *ch.Delta.Content
		}
		p.Reasoning = ch.Delta.reasoning()
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finishReason = *ch.FinishReason
		}
	}
	return p, nil
}

// readError describes a stream that could not be read to its end.
func (s *Stream) readError(err error) error {
	defer s.Close()
	if errors.Is(err, io.EOF) {
		if s.finishReason != "" {
			// Some servers end with the finish reason and no [DONE].
			s.done = true
			return io.EOF
		}
		return &Error{Kind: StreamCut, Endpoint: s.c.base, Status: http.StatusOK,
			Message: "chat: the stream ended before the reply was complete (no finish reason, no [DONE])"}
	}
	switch {
	case errors.Is(err, errEventTooLarge):
		return &Error{Kind: TooLarge, Endpoint: s.c.base, Status: http.StatusOK, Message: fmt.Sprintf("chat: an event of the stream is larger than %d bytes", s.c.opts.MaxEventBytes)}
	case errors.Is(err, errStreamTooLarge):
		return &Error{Kind: TooLarge, Endpoint: s.c.base, Status: http.StatusOK, Message: fmt.Sprintf("chat: the reply is larger than %d bytes", s.c.opts.MaxStreamBytes)}
	}
	return s.cutError(err)
}

// cutError is a read that failed: a stall, a cancellation, or the
// connection dropped.
func (s *Stream) cutError(err error) error {
	if s.stalled.Load() {
		return &Error{Kind: StreamCut, Endpoint: s.c.base, Status: http.StatusOK,
			Message: fmt.Sprintf("chat: the server sent nothing for %s, so the reply was stopped", s.c.opts.StallTimeout)}
	}
	if errors.Is(s.ctx.Err(), context.Canceled) {
		return fmt.Errorf("chat: %w", context.Canceled)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // said in words below
	}
	return &Error{Kind: StreamCut, Endpoint: s.c.base, Status: http.StatusOK, Message: "chat: the connection was lost before the reply was complete", Err: err}
}

// Close ends the stream: the connection closes, and a server stops
// generating when its client goes. Safe to call more than once.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		if s.stall != nil {
			s.stall.Stop()
		}
		s.cancel()
		s.body.Close()
	})
	return nil
}

// FinishReason is the server's reason for the end ("stop", "length", …),
// "" until it has said.
func (s *Stream) FinishReason() string { return s.finishReason }

// Usage is the token counts, nil when the server sent none.
func (s *Stream) Usage() *Usage { return s.usage }

// Timings are llama-server's speeds, nil from other servers.
func (s *Stream) Timings() *Timings { return s.timings }
