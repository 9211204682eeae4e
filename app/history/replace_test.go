package history

import (
	"errors"
	"strings"
	"testing"
)

// Regenerating a reply or editing the last question replaces the last
// exchange: the last user message and what follows it go, the earlier
// turns stay, and search forgets the replaced text.
func TestReplaceLastExchange(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("Boats", "m"))
	must(s.AppendMessage(c.ID, Message{Role: RoleSystem, Content: "Be brief."}))
	q1 := must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "What floats?"}))
	a1 := must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "Wood.", Stats: &Stats{Tokens: 2, FinishReason: "stop"}}))
	must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "And what sinks, zebrafish?"}))
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "Stones.", Stats: &Stats{Tokens: 2, FinishReason: "length"}}))

	q := must(s.ReplaceLastExchange(c.ID, "And what sinks?"))
	got := must(s.Get(c.ID))
	var roles []string
	for _, m := range got.Messages {
		roles = append(roles, string(m.Role)+":"+m.Content)
	}
	want := "system:Be brief.|user:What floats?|assistant:Wood.|user:And what sinks?"
	if strings.Join(roles, "|") != want {
		t.Fatalf("after the replace: %s\nwant %s", strings.Join(roles, "|"), want)
	}
	if last := got.Messages[3]; last.ID != q.ID || last.ID <= a1.ID || !last.CreatedAt.Equal(q.CreatedAt) {
		t.Fatalf("the new question %+v, returned %+v", last, q)
	}
	if got.Messages[1].ID != q1.ID || got.Messages[2].Stats == nil {
		t.Fatalf("the earlier exchange changed: %+v", got.Messages[1:3])
	}
	if hits := must(s.Search("zebrafish", 10)); len(hits) != 0 {
		t.Fatalf("the replaced question is still found: %+v", hits)
	}
	ftsIntegrity(t, s)

	// The same question again (regenerate): only the reply goes.
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "Iron."}))
	must(s.ReplaceLastExchange(c.ID, "And what sinks?"))
	if got := must(s.Get(c.ID)); len(got.Messages) != 4 || got.Messages[3].Content != "And what sinks?" {
		t.Fatalf("after a regenerate: %+v", got.Messages)
	}

	// A conversation with no question yet just gets one.
	empty := must(s.NewConversation("", "m"))
	must(s.ReplaceLastExchange(empty.ID, "First?"))
	if got := must(s.Get(empty.ID)); len(got.Messages) != 1 || got.Messages[0].Role != RoleUser {
		t.Fatalf("an empty conversation: %+v", got.Messages)
	}

	if _, err := s.ReplaceLastExchange(9999, "Lost?"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown conversation: %v, want ErrNotFound", err)
	}
	if _, err := s.ReplaceLastExchange(c.ID, "bad \xff text"); err == nil {
		t.Fatal("a question that is not UTF-8 was kept")
	}
	if got := must(s.Get(c.ID)); len(got.Messages) != 4 {
		t.Fatalf("a refused replace changed the conversation: %+v", got.Messages)
	}
}
