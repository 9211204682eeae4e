package history

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReasoningKept(t *testing.T) {
	s := must(Open(filepath.Join(t.TempDir(), "h.db")))
	defer s.Close()
	c := must(s.NewConversation("think", "m"))
	must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "hi"}))
	st := &Stats{Tokens: 9, FinishReason: "stop", Thinking: 3250 * time.Millisecond}
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "Hello!", Reasoning: "They greet me.", Stats: st}))
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "plain", Stats: &Stats{Tokens: 1}}))
	got := must(s.Get(c.ID)).Messages
	if got[1].Reasoning != "They greet me." || got[1].Content != "Hello!" || got[1].Stats.Thinking != st.Thinking {
		t.Fatalf("kept %+v %+v", got[1], got[1].Stats)
	}
	if got[2].Reasoning != "" || got[2].Stats.Thinking != 0 {
		t.Fatalf("a reply without reasoning: %+v %+v", got[2], got[2].Stats)
	}
	if hits := must(s.Search("greet", 10)); len(hits) != 0 {
		t.Errorf("search finds the reasoning: %+v", hits)
	}
	if _, err := s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "q", Reasoning: "no"}); err == nil || !strings.Contains(err.Error(), "reasoning") {
		t.Errorf("reasoning on a question: %v", err)
	}
	if _, err := s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "a", Stats: &Stats{Thinking: -time.Second}}); err == nil {
		t.Error("a negative thinking time was accepted")
	}
}

// A file of schema version 3 opens: its replies have no reasoning, new ones keep it.
func TestReasoningMigratesAVersion3File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	all := migrations
	migrations = all[:3]
	old, err := Open(path)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	c := must(old.NewConversation("before", "m"))
	if _, err := old.db.Exec(`INSERT INTO messages (conversation_id, role, content, created_at, tokens, finish_reason) VALUES (?, 'assistant', 'old answer', 1, 3, 'stop')`, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := must(Open(path))
	defer s.Close()
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "new", Reasoning: "r", Stats: &Stats{Thinking: time.Second}}))
	got := must(s.Get(c.ID)).Messages
	if len(got) != 2 || got[0].Content != "old answer" || got[0].Reasoning != "" || got[0].Stats.Thinking != 0 ||
		got[1].Reasoning != "r" || got[1].Stats.Thinking != time.Second {
		t.Fatalf("after the migration: %+v", got)
	}
}
