package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// bodyTransport answers every request with one canned event stream.
type bodyTransport struct{ body []byte }

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b.body)), Request: r}, nil
}

func streamOf(t *testing.T, body []byte) *Stream {
	c, err := New("http://fuzz.invalid/v1", "", Options{Transport: bodyTransport{body}, MaxEventBytes: 4096, MaxStreamBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzStream: any bytes as a reply stream end in text and io.EOF or in an
// *Error (never a panic, never another error), within the limits; and any
// text sent as chunks, split anywhere, with LF or CRLF line ends and
// comments between events, comes back whole.
func FuzzStream(f *testing.F) {
	f.Add([]byte(chunkLine("Hello", "")+chunkLine("", "stop")+"data: [DONE]\n\n"), "Hello, world", 3, false)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n"), "line\nbreaks\r\n and \"quotes\"", 1, true)
	f.Add([]byte("error: {\"code\":500,\"message\":\"boom\"}\n\n"), "ü€😀", 2, false)
	f.Add([]byte("event: error\ndata: {\"error\":\"x\"}\n\n"), "", 0, true)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\ndata: more\n\n"), "data: [DONE]\n\n", 5, false)
	f.Add([]byte(": comment\n\ndata:{\"choices\":null,\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]"), "x", 1, false)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"cut"), "ab", 1, false)
	f.Fuzz(func(t *testing.T, raw []byte, text string, pieces int, crlf bool) {
		s := streamOf(t, raw)
		n := 0
		for {
			piece, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Kind == 0 || e.Message == "" {
					t.Fatalf("error %v (%T) is not a described *Error", err, err)
				}
				break
			}
			n += len(piece)
			if n > 3*len(raw) { // an invalid byte in a JSON string becomes U+FFFD, 3 bytes
				t.Fatalf("%d bytes of text from a %d-byte stream", n, len(raw))
			}
		}

		if !utf8.ValidString(text) {
			return // JSON would replace the invalid bytes
		}
		eol := "\n"
		if crlf {
			eol = "\r\n"
		}
		var b strings.Builder
		pieces = max(1, min(pieces, 16))
		rest := text
		for i := 0; i < pieces; i++ {
			cut := len(rest)
			if i < pieces-1 {
				cut = len(rest) / 2
				for cut > 0 && !utf8.RuneStart(rest[cut]) {
					cut--
				}
			}
			data, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": rest[:cut]}}}})
			b.WriteString(": keep-alive" + eol + "data: " + string(data) + eol + eol)
			rest = rest[cut:]
		}
		b.WriteString("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}" + eol + eol + "data: [DONE]" + eol + eol)
		if b.Len() > 1<<16 {
			return
		}
		got, err := readAll(streamOf(t, []byte(b.String())))
		if err != nil || got != text {
			t.Fatalf("round trip: got %q, %v; want %q", got, err, text)
		}
	})
}
