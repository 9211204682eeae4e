package history

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDocumentsRoundTrip(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("report", "m"))
	if got := must(s.Documents(c.ID)); len(got) != 0 {
		t.Fatalf("a new conversation has documents: %+v", got)
	}
	pdf := Document{Name: "report.pdf", Kind: "pdf", Title: "Q3", Path: "/Users/x/report.pdf", Size: 5000,
		SHA256: strings.Repeat("0f", 32), Text: "page one\fpage two\n",
		Pages: []DocumentPage{{Number: 1, Start: 0, End: 9}, {Number: 2, Start: 9, End: 18}}, Warnings: []string{"page 3 is an image"}}
	notes := Document{Name: "notes.md", Kind: "markdown", Size: 7, SHA256: strings.Repeat("1e", 32), Text: "# Notes\n"}
	if err := s.SetDocuments(c.ID, []Document{pdf, notes}); err != nil {
		t.Fatal(err)
	}
	got := must(s.Documents(c.ID))
	if len(got) != 2 {
		t.Fatalf("%d documents kept, want 2", len(got))
	}
	for i, want := range []Document{pdf, notes} {
		g := got[i]
		if g.ID == 0 || g.ConversationID != c.ID {
			t.Errorf("document %d: id %d, conversation %d", i, g.ID, g.ConversationID)
		}
		g.ID, g.ConversationID = 0, 0
		if !reflect.DeepEqual(g, want) {
			t.Errorf("document %d read back as %+v, want %+v", i, g, want)
		}
	}

	// The same set again keeps the rows; a changed set adds and removes.
	if err := s.SetDocuments(c.ID, []Document{notes, pdf}); err != nil {
		t.Fatal(err)
	}
	again := must(s.Documents(c.ID))
	if again[0].ID != got[1].ID || again[1].ID != got[0].ID {
		t.Fatalf("reordering made new rows: %d,%d then %d,%d", got[0].ID, got[1].ID, again[0].ID, again[1].ID)
	}
	edited := notes
	edited.SHA256, edited.Text = strings.Repeat("2d", 32), "# Notes, edited\n"
	if err := s.SetDocuments(c.ID, []Document{edited}); err != nil {
		t.Fatal(err)
	}
	last := must(s.Documents(c.ID))
	if len(last) != 1 || last[0].Text != edited.Text || last[0].ID == got[1].ID {
		t.Fatalf("after replacing the set: %+v", last)
	}
	// The same file attached twice is kept twice, and stays twice.
	for range 3 {
		if err := s.SetDocuments(c.ID, []Document{notes, notes}); err != nil {
			t.Fatal(err)
		}
	}
	if twice := must(s.Documents(c.ID)); len(twice) != 2 || twice[0].ID == twice[1].ID {
		t.Fatalf("the same document attached twice, kept three times: %+v", twice)
	}
	if err := s.SetDocuments(c.ID, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(must(s.Documents(c.ID))); n != 0 {
		t.Fatalf("%d documents left after removing all", n)
	}

	// Deleting the conversation deletes its documents.
	if err := s.SetDocuments(c.ID, []Document{pdf}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(c.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.db.QueryRow(`SELECT count(*) FROM documents`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d documents left of a deleted conversation (%v)", left, err)
	}
	if err := s.SetDocuments(c.ID, []Document{pdf}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("documents for a deleted conversation: %v", err)
	}
}

func TestDocumentsBadInput(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("x", "m"))
	good := Document{Name: "a.txt", Kind: "text", Size: 2, SHA256: strings.Repeat("aa", 32), Text: "a\n"}
	for what, d := range map[string]Document{
		"no name":        {Kind: "text", SHA256: good.SHA256, Text: "a"},
		"no hash":        {Name: "a.txt", Kind: "text", Text: "a"},
		"negative size":  {Name: "a.txt", SHA256: good.SHA256, Size: -1},
		"invalid UTF-8":  {Name: "a.txt", SHA256: good.SHA256, Text: "\xff"},
		"page past text": {Name: "a.pdf", SHA256: good.SHA256, Text: "ab", Pages: []DocumentPage{{Number: 1, Start: 0, End: 3}}},
	} {
		if err := s.SetDocuments(c.ID, []Document{good, d}); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	if n := len(must(s.Documents(c.ID))); n != 0 {
		t.Fatalf("a refused set left %d documents", n)
	}
}

// A file written before documents were kept (schema version 2) opens,
// keeps its conversations and answers' sources, and keeps documents from
// then on.
func TestDocumentsMigrateAVersion2File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	all := migrations
	migrations = all[:2]
	old, err := Open(path)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	c := must(old.NewConversation("before", "m"))
	src := []Source{{Number: 1, Document: "a.txt", Label: "whole document, lines 1–2"}}
	// As a version-2 build wrote them (no columns of later versions).
	for _, m := range []struct{ role, content, sources any }{{"user", "what?", nil}, {"assistant", "this [1]", `[{"number":1,"document":"a.txt","label":"whole document, lines 1–2"}]`}} {
		if _, err := old.db.Exec(`INSERT INTO messages (conversation_id, role, content, created_at, sources) VALUES (?, ?, ?, 1, ?)`,
			c.ID, m.role, m.content, m.sources); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.db.Exec(`SELECT count(*) FROM documents`); err == nil {
		t.Fatal("the version-2 file already has a documents table")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := must(Open(path))
	defer s.Close()
	got := must(s.Get(c.ID))
	if len(got.Messages) != 2 || !reflect.DeepEqual(got.Messages[1].Sources, src) {
		t.Fatalf("after the migration: %+v", got.Messages)
	}
	if docs := must(s.Documents(c.ID)); len(docs) != 0 {
		t.Fatalf("an old conversation has documents: %+v", docs)
	}
	d := Document{Name: "a.txt", Kind: "text", Size: 2, SHA256: strings.Repeat("aa", 32), Text: "a\n"}
	if err := s.SetDocuments(c.ID, []Document{d}); err != nil {
		t.Fatal(err)
	}
	if docs := must(s.Documents(c.ID)); len(docs) != 1 || docs[0].Text != "a\n" {
		t.Fatalf("kept after the migration: %+v", docs)
	}
	var version int
	if err := s.db.QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", version, err, len(migrations))
	}
}
