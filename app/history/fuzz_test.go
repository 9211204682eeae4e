package history

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzMarkdownExport: any title and message text either is refused with an
// error (invalid UTF-8) or round-trips, and the export holds every message
// verbatim with no code fence left open. Never a panic.
func FuzzMarkdownExport(f *testing.F) {
	f.Add("Hello", "model", "How do I print?", "```go\nfmt.Println()\n```")
	f.Add("", "", "", "")
	f.Add("# ``` title", "m", "````\nunclosed", "~~~\n```\n")
	f.Add("\xff", "m", "\x00 nul and 👩‍👧 emoji", "## Assistant\n\n*fake stats*")
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, firstLine, model, user, reply string) {
		title := DeriveTitle(firstLine)
		if !utf8.ValidString(title) || utf8.RuneCountInString(title) > TitleRunes || strings.ContainsAny(title, "\r\n") {
			t.Fatalf("DeriveTitle(%q) = %q", firstLine, title)
		}
		c, err := s.NewConversation(title, model)
		if err != nil {
			if utf8.ValidString(model) && !strings.ContainsAny(model, "\r\n") {
				t.Fatalf("NewConversation(%q, %q): %v", title, model, err)
			}
			return
		}
		defer s.Delete(c.ID)
		contents := []string{user, reply}
		for i, content := range contents {
			role := []Role{RoleUser, RoleAssistant}[i]
			_, err := s.AppendMessage(c.ID, Message{Role: role, Content: content})
			if (err != nil) == utf8.ValidString(content) {
				t.Fatalf("AppendMessage(%q): %v", content, err)
			}
		}
		got, err := s.Get(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		md, err := s.ExportMarkdown(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(md, "# ") {
			t.Fatalf("export does not start with the title heading: %q", md)
		}
		for _, m := range got.Messages {
			if !strings.Contains(md, m.Content) {
				t.Fatalf("export lacks %q:\n%s", m.Content, md)
			}
		}
		for _, content := range contents {
			if utf8.ValidString(content) && !strings.Contains(md, content) {
				t.Fatalf("export lacks %q", content)
			}
		}
		if fence := openFence(md); fence != "" {
			t.Fatalf("export leaves fence %q open:\n%s", fence, md)
		}
	})
}

// FuzzSearch: any query either is refused with a clear error (empty,
// invalid UTF-8, NUL, too long) or runs, and a query taken from a stored text
// finds it: no character is treated as a wildcard or as FTS syntax.
func FuzzSearch(f *testing.F) {
	docs := []string{
		`100% of snake_case names use "quotes" and it's \fine\`,
		"NEAR(a b) AND c* OR -d ^e title:x {f g} + h",
		"日本語 Ünïcödé 👩‍👧 text",
	}
	f.Add("%", 0, 3)
	f.Add(`"quotes" and it`, 0, 0)
	f.Add("", 1, 4)
	f.Add("*", 1, 20)
	f.Add("\xff\xfe", 2, 2)
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	for _, d := range docs {
		c, err := s.NewConversation("doc", "m")
		if err != nil {
			f.Fatal(err)
		}
		if _, err := s.AppendMessage(c.ID, Message{Role: RoleUser, Content: d}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, query string, doc, start int) {
		if _, err := s.Search(query, 10); err != nil {
			q := strings.TrimSpace(query)
			if q != "" && utf8.ValidString(q) && !strings.ContainsRune(q, 0) && utf8.RuneCountInString(q) <= maxQueryRunes {
				t.Fatalf("Search(%q): %v", query, err)
			}
		}
		// A substring of a stored text, cut at rune boundaries.
		d := []rune(docs[uint(doc)%uint(len(docs))])
		i := uint(start) % uint(len(d))
		j := i + 1 + uint(len(query))%uint(len(d)-int(i))
		sub := strings.TrimSpace(string(d[i:j]))
		if sub == "" {
			return
		}
		hits, err := s.Search(sub, 10)
		if err != nil {
			t.Fatalf("Search(%q): %v", sub, err)
		}
		if len(hits) == 0 {
			t.Fatalf("Search(%q) did not find %q", sub, string(d))
		}
	})
}
