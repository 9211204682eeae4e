package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testKey = "sk-secret-key-1234"

// sseHandler answers a chat request with the given raw stream.
func sseHandler(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, raw)
	}
}

func chunkLine(text, finish string) string {
	c := map[string]any{"object": "chat.completion.chunk"}
	ch := map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": nil}
	if finish != "" {
		ch["finish_reason"] = finish
	}
	c["choices"] = []any{ch}
	b, _ := json.Marshal(c)
	return "data: " + string(b) + "\n\n"
}

func newTestClient(t *testing.T, url string, o Options) *Client {
	t.Helper()
	c, err := New(url, testKey, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll reads a stream to its end: the text, and the error that ended it
// (nil at a complete end).
func readAll(s *Stream) (string, error) {
	var b strings.Builder
	for {
		text, err := s.Next()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		b.WriteString(text)
	}
}

func TestNormalizeURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1", ""},
		{" https://api.example.com/v1/ ", "https://api.example.com/v1", ""},
		{"http://localhost:11434/v1", "http://localhost:11434/v1", ""},
		{"https://gw.example.com/openai/v1", "https://gw.example.com/openai/v1", ""},
		{"http://[::1]:8080", "http://[::1]:8080/v1", ""},
		{"", "", "empty"},
		{"127.0.0.1:8080", "", "http:// or https://"},
		{"ftp://host/v1", "", "http:// or https://"},
		{"http://", "", "no host"},
		{"http://user:pw@host/v1", "", "key field"},
		{"http://host/v1?x=1", "", "query"},
		{"http://host/v1#frag", "", "query or fragment"},
		{"http://ho st/", "", "not a URL"},
	} {
		got, err := NormalizeURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NormalizeURL(%q) = %q, %v; want an error mentioning %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestModels(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		io.WriteString(w, `{"object":"list","data":[
			{"id":"tiny","object":"model","owned_by":"nibble","context_length":4096},
			{"id":"vllm-model","max_model_len":32768},
			{"id":"ollama:7b","owned_by":"library"},
			{"id":""}]}`)
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, Options{})
	got, err := c.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{{ID: "tiny", ContextTokens: 4096, OwnedBy: "nibble"}, {ID: "vllm-model", ContextTokens: 32768}, {ID: "ollama:7b", OwnedBy: "library"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("models = %+v, want %+v", got, want)
	}
	if auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q, want the bearer key", auth)
	}
	if c.Host() != strings.TrimPrefix(srv.URL, "http://") {
		t.Errorf("Host() = %q", c.Host())
	}
}

func TestModelsErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   Kind
		want   string
	}{
		{"bad key (OpenAI)", 401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, Unauthorized, "refused the API key (401): Incorrect API key provided (invalid_api_key)"},
		{"bad key (llama-server)", 401, `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`, Unauthorized, "Invalid API Key (401)"},
		{"forbidden", 403, `forbidden`, Unauthorized, "access denied (403): forbidden"},
		{"wrong path", 404, `404 page not found`, NotCompatible, "no OpenAI-compatible API at this address (404); the URL usually ends in /v1: 404 page not found"},
		{"web page", 200, `<!doctype html><html><body>Welcome</body></html>`, NotCompatible, "not an OpenAI-compatible models list (not JSON, perhaps a web page)"},
		{"other JSON", 200, `{"models":[{"name":"llama3"}]}`, NotCompatible, `no "data" list`},
		{"vLLM error", 500, `{"object":"error","message":"engine dead","type":"InternalServerError","code":500}`, ServerError, "answered 500: engine dead (500)"},
		{"Ollama error", 500, `{"error":"out of memory"}`, ServerError, "answered 500: out of memory"},
		{"FastAPI detail", 422, `{"detail":"Not authenticated"}`, ServerError, "answered 422: Not authenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := newTestClient(t, srv.URL, Options{}).Models(context.Background())
			checkClientError(t, err, tc.kind, tc.want)
		})
	}
}

func TestModelsTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":[`+strings.Repeat(`{"id":"x"},`, 1000)+`{"id":"y"}]}`)
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv.URL, Options{MaxListBytes: 1000}).Models(context.Background())
	if !IsKind(err, TooLarge) {
		t.Errorf("error = %v, want TooLarge", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := newTestClient(t, "http://"+addr, Options{ConnectTimeout: time.Second})
	_, err = c.Models(context.Background())
	if !IsKind(err, Unreachable) || !strings.Contains(err.Error(), "cannot be reached") || !strings.Contains(err.Error(), addr) {
		t.Errorf("Models: %v, want Unreachable naming %s", err, addr)
	}
	_, err = c.Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if !IsKind(err, Unreachable) {
		t.Errorf("Chat: %v, want Unreachable", err)
	}
}

func TestFirstByteTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := newTestClient(t, srv.URL, Options{FirstByteTimeout: 150 * time.Millisecond})
	t0 := time.Now()
	_, err := c.Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if !IsKind(err, Unreachable) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("error = %v, want a timeout", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("the timeout took %v", d)
	}
}

func TestChatStream(t *testing.T) {
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": keep-alive comment\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, chunkLine("Hel", ""))
		w.(http.Flusher).Flush()
		io.WriteString(w, chunkLine("lo, wörld", ""))
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"timings":{"prompt_per_second":250.5,"predicted_per_second":40}}`+"\r\n\r\n")
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL+"/v1/", Options{})
	temp := float32(0.5)
	s, err := c.Chat(context.Background(), ChatRequest{Model: "tiny", Messages: []Message{{"system", "be brief"}, {"user", "hi"}}, Temperature: &temp, MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	text, err := readAll(s)
	if err != nil || text != "Hello, wörld" {
		t.Fatalf("stream = %q, %v", text, err)
	}
	if s.FinishReason() != "stop" || s.Usage() == nil || *s.Usage() != (Usage{12, 3}) || s.Timings() == nil || s.Timings().PromptPerSecond != 250.5 {
		t.Errorf("finish %q usage %+v timings %+v", s.FinishReason(), s.Usage(), s.Timings())
	}
	if auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", auth)
	}
	if got["stream"] != true || got["model"] != "tiny" || got["max_tokens"] != float64(20) || got["temperature"] != 0.5 {
		t.Errorf("request body = %v", got)
	}
	if msgs, _ := got["messages"].([]any); len(msgs) != 2 {
		t.Errorf("messages = %v", got["messages"])
	}
	if _, ok := got["top_p"]; ok {
		t.Errorf("an unset top_p was sent: %v", got)
	}
}

func TestChatErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		model   string
		atStart bool // Chat fails, rather than Next
		kind    Kind
		want    string
	}{
		{"model not found (OpenAI)", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
		}, "gpt-9", true, ModelNotFound, `no model "gpt-9" (404)`},
		{"model not found (Ollama)", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`)
		}, "llama9", true, ModelNotFound, "try pulling it first"},
		{"path not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, "m", true, NotCompatible, "no OpenAI-compatible API"},
		{"bad key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"invalid api key","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}, "m", true, Unauthorized, "refused the API key"},
		{"error chunk (OpenAI shape)", sseHandler(chunkLine("a", "") + `data: {"error":{"message":"context length exceeded","type":"invalid_request_error"}}` + "\n\n"),
			"", false, ServerError, "context length exceeded"},
		{"error line (llama-server)", sseHandler(chunkLine("a", "") + `error: {"code":500,"message":"slot unavailable","type":"server_error"}` + "\n\n"),
			"", false, ServerError, "slot unavailable (500)"},
		{"error string (Ollama)", sseHandler(`data: {"error":"llama runner process has terminated"}` + "\n\n"),
			"", false, ServerError, "llama runner process has terminated"},
		{"error event", sseHandler("event: error\ndata: {\"message\":\"overloaded\"}\n\n"), "", false, ServerError, "overloaded"},
		{"cut mid-way", sseHandler(chunkLine("a", "") + chunkLine("b", "")), "", false, StreamCut, "ended before the reply was complete"},
		{"cut mid-event", sseHandler(chunkLine("a", "") + `data: {"choices":[{"delta":{"content":"b`), "", false, StreamCut, "connection was lost"},
		{"not JSON", sseHandler("data: hello there\n\n"), "", false, NotCompatible, `"hello there"`},
		{"native Ollama chunk", sseHandler(`data: {"model":"llama3","message":{"role":"assistant","content":"hi"},"done":false}` + "\n\n"),
			"", false, NotCompatible, "not an OpenAI-compatible chunk"},
		{"JSON of another shape", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"response":"hi","done":true}`)
		}, "", true, NotCompatible, "neither a stream nor"},
		{"event too large", sseHandler(chunkLine(strings.Repeat("x", 5000), "")), "", false, TooLarge, "larger than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := newTestClient(t, srv.URL, Options{MaxEventBytes: 4096})
			s, err := c.Chat(context.Background(), ChatRequest{Model: tc.model, Messages: []Message{{"user", "hi"}}})
			if tc.atStart {
				if s != nil {
					t.Fatalf("Chat started a stream, want %s", tc.kind)
				}
			} else {
				if err != nil {
					t.Fatalf("Chat: %v", err)
				}
				_, err = readAll(s)
			}
			checkClientError(t, err, tc.kind, tc.want)
		})
	}
}

// A server that ignores "stream": the whole completion in one answer.
func TestChatNotStreamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"All at once."},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":4}}`)
	}))
	defer srv.Close()
	s, err := newTestClient(t, srv.URL, Options{}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	text, err := readAll(s)
	if err != nil || text != "All at once." || s.FinishReason() != "length" || s.Usage().CompletionTokens != 4 {
		t.Errorf("got %q, %v, finish %q, usage %+v", text, err, s.FinishReason(), s.Usage())
	}
}

// A finish reason without [DONE] is a complete reply (some servers end so).
func TestChatFinishWithoutDone(t *testing.T) {
	srv := httptest.NewServer(sseHandler(chunkLine("x", "") + chunkLine("", "length")))
	defer srv.Close()
	s, err := newTestClient(t, srv.URL, Options{}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := readAll(s); err != nil || text != "x" || s.FinishReason() != "length" {
		t.Errorf("got %q, %v, finish %q", text, err, s.FinishReason())
	}
}

// Cancelling the context closes the connection, and the server sees its
// client go (that is what stops its generation).
func TestChatCancel(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := io.WriteString(w, chunkLine(fmt.Sprint(i, " "), "")); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		close(gone)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := newTestClient(t, srv.URL, Options{}).Chat(ctx, ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	var err2 error
	for range 1000 {
		if _, err2 = s.Next(); err2 != nil {
			break
		}
	}
	if !errors.Is(err2, context.Canceled) {
		t.Errorf("after cancel, Next = %v, want context.Canceled", err2)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the client go within 5s")
	}
}

func TestChatStall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("first", ""))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s, err := newTestClient(t, srv.URL, Options{StallTimeout: 150 * time.Millisecond}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	text, err := readAll(s)
	if text != "first" || !IsKind(err, StreamCut) || !strings.Contains(err.Error(), "sent nothing for 150ms") {
		t.Errorf("got %q, %v; want the first piece, then a stall", text, err)
	}
}

func TestStreamTooLarge(t *testing.T) {
	var raw strings.Builder
	for range 100 {
		raw.WriteString(chunkLine("0123456789", ""))
	}
	srv := httptest.NewServer(sseHandler(raw.String()))
	defer srv.Close()
	s, err := newTestClient(t, srv.URL, Options{MaxStreamBytes: 2000}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(s); !IsKind(err, TooLarge) {
		t.Errorf("error = %v, want TooLarge", err)
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New("http://h/v1", "a\nb", Options{}); err == nil {
		t.Error("a key with a line break was accepted")
	}
	if _, err := New("file:///etc/passwd", "", Options{}); err == nil {
		t.Error("a file URL was accepted")
	}
}

// checkClientError wants err to be an *Error of kind mentioning want, and
// never showing the key.
func checkClientError(t *testing.T, err error, kind Kind, want string) {
	t.Helper()
	if !IsKind(err, kind) || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want %s mentioning %q", err, kind, want)
	}
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Errorf("the error shows the key: %v", err)
	}
}
