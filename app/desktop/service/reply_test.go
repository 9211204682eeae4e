package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"nibble/app/settings"
)

// promptTokensOf counts msgs as the local model would get them, the
// settings' system prompt included.
func promptTokensOf(t *testing.T, s *Service, msgs []Message) int {
	t.Helper()
	r, err := s.chat.request(SendRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.loader.engine().Tokenize(r)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// kept is conversation id's messages as "role:content" lines.
func kept(t *testing.T, s *Service, id int64) []string {
	t.Helper()
	c, err := s.Conversation(id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range c.Messages {
		out = append(out, m.Role+":"+m.Content)
	}
	return out
}

// The reply limit: a chat's own, else the settings'; a reply stops at it
// with "length" and its final event names the limit. No limit, or a limit
// past the room the prompt leaves, runs to the end of the context.
func TestReplyLimit(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ask := func(maxTokens int) Final {
		t.Helper()
		res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Tell me a long story about the sea."}}, MaxTokens: maxTokens})
		if err != nil {
			t.Fatal(err)
		}
		f := rec.final(t)
		if f.ID != res.ReplyID {
			t.Fatalf("final of %s, want %s", f.ID, res.ReplyID)
		}
		return f
	}
	if f := ask(5); f.FinishReason != "length" || f.GenTokens != 5 || f.MaxTokens != 5 {
		t.Fatalf("a chat's limit of 5: %+v", f)
	}
	if err := s.store.Update(func(c *settings.Settings) error { c.MaxReplyTokens = 7; return nil }); err != nil {
		t.Fatal(err)
	}
	if f := ask(0); f.FinishReason != "length" || f.GenTokens != 7 || f.MaxTokens != 7 {
		t.Fatalf("the settings' limit of 7: %+v", f)
	}
	// The demo model's own cap stays below any larger limit.
	if f := ask(NoReplyLimit); f.MaxTokens != DemoMaxTokens || f.GenTokens > DemoMaxTokens {
		t.Fatalf("no limit on the demo model: %+v, want its cap of %d", f, DemoMaxTokens)
	}
	if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: -2}); err == nil || !strings.Contains(err.Error(), "reply limit -2") {
		t.Fatalf("a limit of -2: %v", err)
	}

	// A model of the user's (no demo cap) in a context of 1024: the
	// settings' 2048 is more than the room left, and no limit at all
	// runs to the context's end too.
	path := filepath.Join(t.TempDir(), "mine.gguf")
	tinyModel(t, path, 4096)
	if _, err := s.LoadModel(LoadRequest{Path: path, Ctx: 1024, KV: "q4"}); err != nil {
		t.Fatal(err)
	}
	if err := s.store.Update(func(c *settings.Settings) error { c.MaxReplyTokens = 2048; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, asked := range []int{0, NoReplyLimit} {
		f := ask(asked)
		if f.FinishReason != "length" || f.MaxTokens != 0 || f.PromptTokens+f.GenTokens < 1000 {
			t.Fatalf("asked %d in a context of 1024: %+v, want the reply to fill the context, with no limit named", asked, f)
		}
	}
}

// Regenerating the last reply and editing the last question: the model
// gets the conversation without the old reply (with the edited question),
// and the history keeps the new exchange in place of the old one.
func TestRegenerateAndEditLocally(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	q1 := Message{Role: "user", Content: "Name a river."}
	res, err := s.Send(SendRequest{Messages: []Message{q1}, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	a1 := Message{Role: "assistant", Content: rec.final(t).Text}
	q2 := Message{Role: "user", Content: "And a mountain?"}
	conv := res.ConversationID
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, q2}, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	old := rec.final(t)

	// Regenerate: the same question, the old reply left out, and a new
	// draw of the sampler (the reply's words differ).
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, q2}, MaxTokens: 4, ReplaceLast: true}); err != nil {
		t.Fatal(err)
	}
	again := rec.final(t)
	if want := promptTokensOf(t, s, []Message{q1, a1, q2}); again.PromptTokens != want || again.PromptTokens != old.PromptTokens {
		t.Fatalf("the regenerated reply's prompt has %d tokens, want %d (the first time: %d)", again.PromptTokens, want, old.PromptTokens)
	}
	if again.Text == old.Text {
		t.Fatalf("the regenerated reply is the old one again: %q", again.Text)
	}
	want := []string{"user:" + q1.Content, "assistant:" + a1.Content, "user:" + q2.Content, "assistant:" + again.Text}
	if got := kept(t, s, conv); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("after regenerating:\n got %q\nwant %q", got, want)
	}

	// Edit: a longer question in place of the last one.
	edited := Message{Role: "user", Content: "And the highest mountain of the Alps, please?"}
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, edited}, MaxTokens: 4, ReplaceLast: true}); err != nil {
		t.Fatal(err)
	}
	f := rec.final(t)
	if want := promptTokensOf(t, s, []Message{q1, a1, edited}); f.PromptTokens != want || f.PromptTokens <= old.PromptTokens {
		t.Fatalf("the edited question's prompt has %d tokens, want %d (more than the old %d)", f.PromptTokens, want, old.PromptTokens)
	}
	want = []string{"user:" + q1.Content, "assistant:" + a1.Content, "user:" + edited.Content, "assistant:" + f.Text}
	if got := kept(t, s, conv); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("after editing:\n got %q\nwant %q", got, want)
	}
	if found, err := s.Conversations("And a mountain"); err != nil || len(found) != 0 {
		t.Fatalf("the replaced question is still found: %+v, %v", found, err)
	}

	// A replacing turn that cannot start leaves the exchange it would
	// have replaced; one without a question last is refused.
	long := Message{Role: "user", Content: strings.Repeat("word ", 2000)}
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, long}, ReplaceLast: true}); err == nil {
		t.Fatal("a question past the context was sent")
	}
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1}, ReplaceLast: true}); err == nil ||
		!strings.Contains(err.Error(), "question as the last message") {
		t.Fatalf("replacing with a reply last: %v", err)
	}
	if got := kept(t, s, conv); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("after two refused replacements:\n got %q\nwant %q", got, want)
	}

	// In a conversation deleted meanwhile, the turn starts a new one.
	if err := s.DeleteConversation(conv); err != nil {
		t.Fatal(err)
	}
	res, err = s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, q2}, MaxTokens: 2, ReplaceLast: true})
	if err != nil {
		t.Fatal(err)
	}
	f = rec.final(t)
	if res.ConversationID == conv || len(kept(t, s, res.ConversationID)) != 4 {
		t.Fatalf("a replacement in a deleted conversation went to %d: %q", res.ConversationID, kept(t, s, res.ConversationID))
	}
}

// recordingEndpoint is an OpenAI-compatible endpoint that answers "reply
// N" and keeps each request's body.
type recordingEndpoint struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (e *recordingEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		io.WriteString(w, `{"data":[{"id":"m"}]}`)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	e.mu.Lock()
	e.bodies = append(e.bodies, body)
	n := len(e.bodies)
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"reply %d\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", n)
}

// last is the last request's messages as "role:content" lines, and its
// max_tokens (0: none).
func (e *recordingEndpoint) last() ([]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	body := e.bodies[len(e.bodies)-1]
	var msgs []string
	for _, m := range body["messages"].([]any) {
		m := m.(map[string]any)
		msgs = append(msgs, fmt.Sprint(m["role"], ":", m["content"]))
	}
	max, _ := body["max_tokens"].(float64)
	return msgs, int(max)
}

// The messages a model gets, word for word, on a remote endpoint: a
// regenerated reply's request holds the conversation up to the question,
// an edited one the edited question; max_tokens is the chat's limit, else
// the settings'.
func TestRegenerateAndEditSendTheConversation(t *testing.T) {
	ep := &recordingEndpoint{}
	ts := httptest.NewServer(ep)
	defer ts.Close()
	s, rec := newService(t)
	useRemote(t, s, "r", ts.URL, "m")
	q1, q2 := Message{Role: "user", Content: "First?"}, Message{Role: "user", Content: "Second?"}
	res, err := s.Send(SendRequest{Messages: []Message{q1}})
	if err != nil {
		t.Fatal(err)
	}
	a1 := Message{Role: "assistant", Content: rec.final(t).Text}
	conv := res.ConversationID
	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, q2}, MaxTokens: 33}); err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if msgs, max := ep.last(); strings.Join(msgs, "|") != "user:First?|assistant:reply 1|user:Second?" || max != 33 {
		t.Fatalf("the follow-up's request: %q, max_tokens %d", msgs, max)
	}

	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, q2}, ReplaceLast: true}); err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if msgs, max := ep.last(); strings.Join(msgs, "|") != "user:First?|assistant:reply 1|user:Second?" || max != settings.DefaultMaxReplyTokens {
		t.Fatalf("the regenerated reply's request: %q, max_tokens %d (want the settings' %d)", msgs, max, settings.DefaultMaxReplyTokens)
	}
	if got := strings.Join(kept(t, s, conv), "|"); got != "user:First?|assistant:reply 1|user:Second?|assistant:reply 3" {
		t.Fatalf("after regenerating: %q", got)
	}

	if _, err := s.Send(SendRequest{ConversationID: conv, Messages: []Message{q1, a1, {Role: "user", Content: "Second, edited?"}}, ReplaceLast: true, MaxTokens: NoReplyLimit}); err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if msgs, max := ep.last(); strings.Join(msgs, "|") != "user:First?|assistant:reply 1|user:Second, edited?" || max != 0 {
		t.Fatalf("the edited question's request: %q, max_tokens %d (want none)", msgs, max)
	}
	if got := strings.Join(kept(t, s, conv), "|"); got != "user:First?|assistant:reply 1|user:Second, edited?|assistant:reply 4" {
		t.Fatalf("after editing: %q", got)
	}
}

// A remote endpoint refuses a max_tokens past its context, as the local
// scheduler does: a limit the prompt leaves no room for is left out, and
// the reply runs to the end of the endpoint's context.
func TestRemoteReplyLimitFitsTheContext(t *testing.T) {
	ep := &recordingEndpoint{}
	ts := httptest.NewServer(ep)
	defer ts.Close()
	s, rec := newService(t)
	if _, err := s.SaveRemoteEndpoint(RemoteEndpointInput{Name: "small", URL: ts.URL, Model: "m", ContextTokens: 2048}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseRemote("small"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ asked, want int }{{0, 0}, {100, 100}, {2045, 0}} {
		if _, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Hello there"}}, MaxTokens: tc.asked}); err != nil {
			t.Fatal(err)
		}
		if f := rec.final(t); f.MaxTokens != tc.want {
			t.Errorf("asked %d: the final names the limit %d, want %d", tc.asked, f.MaxTokens, tc.want)
		}
		if _, max := ep.last(); max != tc.want {
			t.Errorf("asked %d (the settings' %d): max_tokens %d, want %d", tc.asked, settings.DefaultMaxReplyTokens, max, tc.want)
		}
	}
}
