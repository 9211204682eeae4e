package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// readPieces reads a stream to its end, the answer and the reasoning apart.
func readPieces(t *testing.T, s *Stream) Piece {
	t.Helper()
	var all Piece
	for {
		p, err := s.NextPiece()
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		all.Text += p.Text
		all.Reasoning += p.Reasoning
	}
}

// Reasoning arrives as reasoning_content (llama-server, vLLM) or reasoning (Ollama).
func TestChatReasoning(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		srv := httptest.NewServer(sseHandler(
			`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"` + field + `":"Let me "},"finish_reason":null}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"` + field + `":"think."},"finish_reason":null}]}` + "\n\n" +
				chunkLine("Answer", "") + chunkLine("", "stop") + "data: [DONE]\n\n"))
		s, err := newTestClient(t, srv.URL, Options{}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := readPieces(t, s); got != (Piece{Text: "Answer", Reasoning: "Let me think."}) {
			t.Errorf("%s: %+v", field, got)
		}
		srv.Close()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Four.","reasoning_content":"2+2"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	s, err := newTestClient(t, srv.URL, Options{}).Chat(context.Background(), ChatRequest{Messages: []Message{{"user", "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readPieces(t, s); got != (Piece{Text: "Four.", Reasoning: "2+2"}) {
		t.Errorf("not streamed: %+v", got)
	}
}
