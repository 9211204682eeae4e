package service

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"nibble/internal/testmodel"
)

// A reasoning model's reply: the thinking streams apart from the answer, the
// final event and the history carry both, and the switch reaches the template.
func TestReplyWithReasoning(t *testing.T) {
	s, rec := newService(t)
	path := testmodel.Thinker(t, t.TempDir(), "thinker.gguf")
	st, err := s.LoadModel(LoadRequest{Path: path, Ctx: 1024, KV: "q8"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Model.Reasoning != "think" || st.Model.ThinkingControl != "enable_thinking" {
		t.Fatalf("Status.Model: reasoning %q, control %q", st.Model.Reasoning, st.Model.ThinkingControl)
	}
	q := []Message{{Role: "user", Content: "Hello"}}
	res, err := s.Send(SendRequest{Messages: q})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if f.Text != testmodel.ThinkerAnswer || f.Reasoning != testmodel.ThinkerReasoning || f.ThinkingMs <= 0 {
		t.Fatalf("final: text %q, reasoning %q, thought %g ms", f.Text, f.Reasoning, f.ThinkingMs)
	}
	var thinking strings.Builder
	for _, e := range rec.all(EventDelta) {
		if d := e.(Delta); d.ID == res.ReplyID {
			thinking.WriteString(d.Reasoning)
		}
	}
	if rec.text(res.ReplyID) != testmodel.ThinkerAnswer || thinking.String() != testmodel.ThinkerReasoning {
		t.Fatalf("streamed: answer %q, reasoning %q", rec.text(res.ReplyID), thinking.String())
	}
	c, err := s.Conversation(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	reply := c.Messages[len(c.Messages)-1]
	if reply.Content != testmodel.ThinkerAnswer || reply.Reasoning != testmodel.ThinkerReasoning || reply.Stats == nil || reply.Stats.ThinkingMs <= 0 {
		t.Fatalf("kept: %+v %+v", reply, reply.Stats)
	}

	// Thinking off: Qwen3's template writes the empty think block into the prompt.
	on := promptTokensOf(t, s, q)
	r, err := s.chat.request(SendRequest{Messages: q, Thinking: ThinkingOff})
	if err != nil {
		t.Fatal(err)
	}
	off, err := s.loader.engine().Tokenize(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(off) <= on {
		t.Errorf("thinking off: %d prompt tokens, %d with it on", len(off), on)
	}
	if _, err := s.chat.request(SendRequest{Messages: q, Thinking: "maximal"}); err == nil {
		t.Error("an unknown thinking choice was accepted")
	}
}

// A remote reasoning model: reasoning_content as the server splits it, or a think block left
// in the content by a server that does not, both reach the window apart from the answer.
func TestRemoteReasoning(t *testing.T) {
	for name, stream := range map[string]string{
		"reasoning_content": `data: {"choices":[{"delta":{"reasoning_content":"Hmm."}}]}` + "\n\n" + `data: {"choices":[{"delta":{"content":"Yes."},"finish_reason":"stop"}]}` + "\n\n",
		"inline think":      `data: {"choices":[{"delta":{"content":"<think>\nHm"}}]}` + "\n\n" + `data: {"choices":[{"delta":{"content":"m.</think>\n\nYes."},"finish_reason":"stop"}]}` + "\n\n",
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				io.WriteString(w, `{"data":[{"id":"m"}]}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream+"data: [DONE]\n\n")
		}))
		s, rec := newService(t)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		useRemote(t, s, "r", ts.URL, "m")
		if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}, Thinking: ThinkingOff}); err != nil {
			t.Fatal(err)
		}
		if f := rec.final(t); f.Text != "Yes." || f.Reasoning != "Hmm." {
			t.Errorf("%s: text %q, reasoning %q", name, f.Text, f.Reasoning)
		}
		ts.Close()
	}
}
