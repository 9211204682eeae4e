package history

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSourcesRoundTrip(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("report", "m"))
	must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "What did Q3 earn?"}))
	src := []Source{{Number: 1, Document: "report.pdf", Label: "page 4"}, {Number: 2, Document: "notes.md", Label: "lines 3–9"}}
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "4 M [1].", Stats: &Stats{Tokens: 3}, Sources: src}))
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "No documents."}))
	got := must(s.Get(c.ID))
	if !reflect.DeepEqual(got.Messages[1].Sources, src) || got.Messages[0].Sources != nil || got.Messages[2].Sources != nil {
		t.Fatalf("sources read back: %+v / %+v / %+v", got.Messages[0].Sources, got.Messages[1].Sources, got.Messages[2].Sources)
	}
	md := must(s.ExportMarkdown(c.ID))
	if !strings.Contains(md, "\nSources: [1] report.pdf, page 4; [2] notes.md, lines 3–9\n") {
		t.Fatalf("export lacks the sources:\n%s", md)
	}
	for _, m := range []Message{
		{Role: RoleUser, Content: "q", Sources: src},
		{Role: RoleAssistant, Content: "a", Sources: []Source{{Number: 1, Document: "bad\xff", Label: "page 1"}}},
	} {
		if _, err := s.AppendMessage(c.ID, m); err == nil {
			t.Errorf("AppendMessage(%+v) succeeded", m)
		}
	}
}

// A file written before sources were kept opens, keeps its messages, and
// takes sources from then on.
func TestSourcesMigrateAVersion1File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	all := migrations
	migrations = all[:1]
	old, err := Open(path)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	c := must(old.NewConversation("before", "m"))
	// As the version-1 code wrote it (this build's AppendMessage names the new column).
	if _, err := old.db.Exec(`INSERT INTO messages (conversation_id, role, content, created_at, tokens)
		VALUES (?, 'assistant', 'old reply', 0, 2)`, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := must(Open(path))
	defer s.Close()
	src := []Source{{Number: 1, Document: "a.txt", Label: "whole document, lines 1–2"}}
	must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: "new reply", Sources: src}))
	got := must(s.Get(c.ID))
	if len(got.Messages) != 2 || got.Messages[0].Content != "old reply" || got.Messages[0].Sources != nil || !reflect.DeepEqual(got.Messages[1].Sources, src) {
		t.Fatalf("after the migration: %+v", got.Messages)
	}
}
