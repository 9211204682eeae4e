package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/app/settings"
)

// attachPath attaches the file at path and waits until it is read.
func attachPath(t *testing.T, s *Service, path string) DocumentInfo {
	t.Helper()
	info, err := s.AttachDocumentFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return waitRead(t, s, info.ID)
}

// reopen reopens conversation id as History does, after New chat removed
// the documents old; it waits until the documents that came back are read.
func reopen(t *testing.T, s *Service, id int64, old ...string) (Conversation, []DocumentInfo) {
	t.Helper()
	for _, o := range old {
		s.RemoveDocument(o)
	}
	conv, err := s.OpenConversation(id)
	if err != nil {
		t.Fatal(err)
	}
	var ready []DocumentInfo
	for _, d := range conv.Documents {
		ready = append(ready, waitRead(t, s, d.ID))
	}
	return conv, ready
}

// A document conversation reopened from the history has its documents
// attached again, and a follow-up asks about them as the first question
// did: the same system message, so the engine reuses the cached prefix.
func TestReopenedConversationKeepsItsDocuments(t *testing.T) {
	s, rec := newService(t) // a 1024-token context
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "notes.txt")
	text := strings.Join(filler(24, 0), "\n") + "\n"
	writeFile(t, path, []byte(text))
	info := attachPath(t, s, path)
	if info.State != DocReady || !info.Whole {
		t.Fatalf("attached %+v", info)
	}
	q1 := Message{Role: "user", Content: "Which year does the chapel appear in?"}
	first := SendRequest{Messages: []Message{q1}, MaxTokens: 6, Documents: []string{info.ID}}
	plan1, _, err := s.docs.withDocuments(first)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Send(first)
	if err != nil {
		t.Fatal(err)
	}
	f1 := rec.final(t)
	if f1.Error != "" {
		t.Fatal(f1.Error)
	}

	conv, docs := reopen(t, s, r1.ConversationID, info.ID)
	if len(docs) != 1 || conv.Documents[0].ID == info.ID {
		t.Fatalf("reopened with documents %+v", conv.Documents)
	}
	back := docs[0]
	if back.State != DocReady || back.Name != "notes.txt" || back.Kind != "text" || back.Lines != 24 ||
		back.Tokens != info.Tokens || !back.Whole || back.Fit != info.Fit || back.Note != "" || len(conv.DocumentsNotKept) != 0 {
		t.Fatalf("the document came back as %+v, was %+v (not kept: %q)", back, info, conv.DocumentsNotKept)
	}

	q2 := Message{Role: "user", Content: "And the harbour?"}
	follow := SendRequest{ConversationID: r1.ConversationID, MaxTokens: 6, Documents: []string{back.ID},
		Messages: []Message{q1, {Role: "assistant", Content: f1.Text}, q2}}
	plan2, _, err := s.docs.withDocuments(follow)
	if err != nil {
		t.Fatal(err)
	}
	sys1, sys2 := plan1.Messages[0].Content, plan2.Messages[0].Content
	if sys2 != sys1 || !strings.Contains(sys2, text) {
		t.Fatalf("the follow-up's system message differs from the first question's, or lacks the document:\n%q\n%q", sys1, sys2)
	}
	r2, err := s.Send(follow)
	if err != nil {
		t.Fatal(err)
	}
	f2 := rec.final(t)
	if f2.Error != "" {
		t.Fatal(f2.Error)
	}
	if len(r2.Sources) != 1 || r2.Sources[0].Label != "whole document, lines 1–24" || !r2.Documents[0].Whole {
		t.Fatalf("follow-up sources %+v, uses %+v", r2.Sources, r2.Documents)
	}
	if f2.ReusedTokens < f1.PromptTokens {
		t.Fatalf("the follow-up reused %d tokens, less than the first prompt's %d: the document's prefix was not reused", f2.ReusedTokens, f1.PromptTokens)
	}
	// Reopened again, the conversation still has its one document.
	if conv, docs := reopen(t, s, r1.ConversationID, back.ID); len(docs) != 1 || len(conv.Messages) != 4 {
		t.Fatalf("reopened twice: %d documents, %d messages", len(docs), len(conv.Messages))
	}
}

// Files that changed or are gone since are said so on their chips, and the
// follow-up answers from the kept text: a large one by its most relevant
// parts, with citations.
func TestReopenedDocumentsWhoseFilesChangedOrVanished(t *testing.T) {
	s, rec := newService(t) // a 1024-token context
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	records, todo := filepath.Join(dir, "records.md"), filepath.Join(dir, "todo.txt")
	text, factLine := plantedDocument(400)
	writeFile(t, records, []byte(text))
	writeFile(t, todo, []byte("Buy milk.\nCall the plumber.\n"))
	big, small := attachPath(t, s, records), attachPath(t, s, todo)
	if big.Whole || !small.Whole {
		t.Fatalf("attached %+v / %+v", big, small)
	}
	ask := Message{Role: "user", Content: "What is the access code for Camila Mack?"}
	r1, err := s.Send(SendRequest{Messages: []Message{ask}, MaxTokens: 4, Documents: []string{big.ID, small.ID}})
	if err != nil {
		t.Fatal(err)
	}
	f1 := rec.final(t)

	// The large file is rewritten without the fact; the small one is deleted.
	writeFile(t, records, []byte(strings.Join(filler(400, 7), "\n")))
	if err := os.Remove(todo); err != nil {
		t.Fatal(err)
	}
	conv, docs := reopen(t, s, r1.ConversationID, big.ID, small.ID)
	if len(docs) != 2 || docs[0].Name != "records.md" || docs[1].Name != "todo.txt" {
		t.Fatalf("reopened with %+v", docs)
	}
	if n := docs[0].Note; docs[0].State != DocReady || !strings.HasPrefix(n, "records.md has changed since it was attached: answering from the copy kept with this conversation") {
		t.Fatalf("changed file: %+v", docs[0])
	}
	if n := docs[1].Note; docs[1].State != DocReady || n != "todo.txt is no longer in "+dir+": answering from the copy kept with this conversation" {
		t.Fatalf("vanished file: %+v", docs[1])
	}
	if docs[0].Whole || !docs[1].Whole || docs[0].Lines != 400 {
		t.Fatalf("reopened fits: %+v / %+v", docs[0], docs[1])
	}
	r2, err := s.Send(SendRequest{ConversationID: conv.ID, MaxTokens: 4, Documents: []string{docs[0].ID, docs[1].ID},
		Messages: []Message{ask, {Role: "assistant", Content: f1.Text}, {Role: "user", Content: ask.Content}}})
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.final(t); f.Error != "" {
		t.Fatal(f.Error)
	}
	fact, wholeTodo := false, false
	for _, src := range r2.Sources {
		switch src.DocumentID {
		case docs[0].ID:
			fact = fact || (src.FirstLine <= factLine && factLine <= src.LastLine)
		case docs[1].ID:
			wholeTodo = src.Whole
		}
	}
	if !fact || !wholeTodo || r2.Documents[0].Whole {
		t.Fatalf("follow-up sources %+v: want the kept records.md's part with line %d and todo.txt whole", r2.Sources, factLine)
	}
}

// A conversation whose documents were not kept (kept by a version before
// they were) says which ones its last answer cited, rather than dropping
// them silently.
func TestReopenedConversationNamesDocumentsNotKept(t *testing.T) {
	s, rec := newService(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	info := attach(t, s, "notes.txt", "The chapel was built in 1712.\n")
	r, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "When was the chapel built?"}}, MaxTokens: 4, Documents: []string{info.ID}})
	if err != nil {
		t.Fatal(err)
	}
	rec.final(t)
	if err := s.chat.hist.SetDocuments(r.ConversationID, nil); err != nil { // as an older version left it
		t.Fatal(err)
	}
	conv, docs := reopen(t, s, r.ConversationID, info.ID)
	if len(docs) != 0 || len(conv.DocumentsNotKept) != 1 || conv.DocumentsNotKept[0] != "notes.txt" {
		t.Fatalf("reopened: documents %+v, not kept %q", docs, conv.DocumentsNotKept)
	}
	// Conversation (not OpenConversation) attaches nothing.
	if c, err := s.Conversation(r.ConversationID); err != nil || c.Documents != nil {
		t.Fatalf("Conversation: %+v, %v", c.Documents, err)
	}
}

// Empty files are refused as empty; a file over the one size limit is
// refused before it is read, and the message names the setting.
func TestEmptyAndOversizedDocuments(t *testing.T) {
	s, _ := newService(t)
	for name, text := range map[string]string{"empty.txt": "", "blank.md": " \n\t\n  \n"} {
		got := attach(t, s, name, text)
		if got.State != DocError || !strings.Contains(got.Error, name) || !strings.Contains(got.Error, "the document is empty") {
			t.Errorf("%s: %+v", name, got)
		}
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "zero.txt")
	writeFile(t, empty, nil)
	if got := attachPath(t, s, empty); got.State != DocError || got.Error != `"zero.txt": the document is empty (0 bytes): nothing to attach` {
		t.Errorf("an empty file from a path: %+v", got)
	}

	// The default limit is 16 MiB, for the file and its text alike. A
	// sparse 60 MiB file is refused from its size, before any of it is read.
	huge := filepath.Join(dir, "huge.txt")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(60 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := attachPath(t, s, huge)
	if want := "huge.txt: the file is 60 MiB, over the 16 MiB limit for documents (Settings › Largest document)"; got.State != DocError || got.Error != want || got.Progress != 0 {
		t.Errorf("a 60 MiB file: %+v, want %q", got, want)
	}
	// UTF-16 text grows as UTF-8: a file under the limit whose text is over it.
	setDocumentLimit(t, s, 1<<20)
	u16 := []byte{0xff, 0xfe}
	for range 400_000 { // 800 KB of "€", 1.2 MB of UTF-8
		u16 = append(u16, 0xac, 0x20)
	}
	euro := filepath.Join(dir, "euro.txt")
	writeFile(t, euro, u16)
	if got := attachPath(t, s, euro); got.State != DocError || !strings.Contains(got.Error, "over the 1 MiB limit for documents (Settings › Largest document)") {
		t.Errorf("text over the limit: %+v", got)
	}
}

func setDocumentLimit(t *testing.T, s *Service, n int64) {
	t.Helper()
	if err := s.store.Update(func(c *settings.Settings) error { c.DocumentMaxBytes = n; return nil }); err != nil {
		t.Fatal(err)
	}
}
