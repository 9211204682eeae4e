package history

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden files")

// openTest opens a fresh store whose clock starts at a fixed instant and
// advances one second per reading, so orders and golden text are stable.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.now = fakeClock()
	return s
}

func fakeClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// must unwraps a result in tests; the panic fails the test with a trace to
// the call (Go cannot pass t alongside a multi-value call).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ftsIntegrity(t testing.TB, s *Store) {
	t.Helper()
	if _, err := s.db.Exec(`INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')`); err != nil {
		t.Fatalf("FTS index out of step with messages: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("  Pasta  ", "llama-3.2-3b-q4"))
	if c.ID == 0 || c.Title != "Pasta" || c.Model != "llama-3.2-3b-q4" || !c.CreatedAt.Equal(c.UpdatedAt) {
		t.Fatalf("new conversation = %+v", c)
	}
	sys := must(s.AppendMessage(c.ID, Message{Role: RoleSystem, Content: "Be brief."}))
	user := must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "How long do I boil spaghetti?"}))
	reply := must(s.AppendMessage(c.ID, Message{Role: RoleAssistant}))
	if err := s.UpdateMessage(reply.ID, "About 9", nil); err != nil {
		t.Fatal(err)
	}
	stats := &Stats{Tokens: 12, TokensPerSec: 41.5, TTFT: 180*time.Millisecond + 7*time.Microsecond, FinishReason: "stop"}
	if err := s.UpdateMessage(reply.ID, "About 9 minutes.", stats); err != nil {
		t.Fatal(err)
	}
	reply.Content, reply.Stats = "About 9 minutes.", stats

	got := must(s.Get(c.ID))
	want := c
	want.Messages = []Message{sys, user, reply}
	want.UpdatedAt = got.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Get:\n got %+v\nwant %+v", got, want)
	}
	if !got.UpdatedAt.After(c.UpdatedAt) {
		t.Errorf("updated_at did not move: %v", got.UpdatedAt)
	}

	if err := s.Rename(c.ID, "Spaghetti timing"); err != nil {
		t.Fatal(err)
	}
	list := must(s.List(10, 0))
	if len(list) != 1 || list[0].Title != "Spaghetti timing" || list[0].Messages != 3 || list[0].Snippet != "About 9 minutes." {
		t.Fatalf("List = %+v", list)
	}
	hits := must(s.Search("spaghetti", 10))
	if len(hits) != 1 || hits[0].ID != c.ID || hits[0].Snippet != "How long do I boil spaghetti?" {
		t.Fatalf("Search = %+v", hits)
	}
	ftsIntegrity(t, s)

	if err := s.Delete(c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("messages left after Delete: %d (%v)", n, err)
	}
	if hits := must(s.Search("spaghetti", 10)); len(hits) != 0 {
		t.Fatalf("Search after Delete = %+v", hits)
	}
	ftsIntegrity(t, s)
	// A deleted id is not reused, so a stale id in the UI cannot hit a
	// newer conversation.
	c2 := must(s.NewConversation("", "m"))
	if c2.ID == c.ID {
		t.Fatalf("id %d reused after delete", c.ID)
	}
	if got := must(s.Get(c2.ID)); !reflect.DeepEqual(got, c2) || got.Messages == nil {
		t.Fatalf("empty conversation: Get = %+v, NewConversation = %+v", got, c2)
	}
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := must(Open(path))
	c := must(s.NewConversation("kept", "m"))
	must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "hello"}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = must(Open(path))
	defer s.Close()
	got := must(s.Get(c.ID))
	if got.Title != "kept" || len(got.Messages) != 1 || got.Messages[0].Content != "hello" {
		t.Fatalf("after reopen: %+v", got)
	}
	var version int
	var mode, fk, sync, appID, ckptFull string
	db := s.db
	for q, dst := range map[string]any{
		`PRAGMA checkpoint_fullfsync`:             &ckptFull,
		`SELECT max(version) FROM schema_version`: &version,
		`PRAGMA journal_mode`:                     &mode,
		`PRAGMA foreign_keys`:                     &fk,
		`PRAGMA synchronous`:                      &sync,
		`PRAGMA application_id`:                   &appID,
	} {
		if err := db.QueryRow(q).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if version != len(migrations) || mode != "wal" || fk != "1" || sync != "2" || appID != fmt.Sprint(applicationID) || ckptFull != "1" {
		t.Fatalf("version %d journal %s foreign_keys %s synchronous %s application_id %s checkpoint_fullfsync %s",
			version, mode, fk, sync, appID, ckptFull)
	}
}

func TestOrdering(t *testing.T) {
	s := openTest(t)
	var ids []int64
	for i := range 5 {
		c := must(s.NewConversation(fmt.Sprintf("c%d", i), "m"))
		ids = append(ids, c.ID)
	}
	// Appending to the oldest moves it to the top.
	must(s.AppendMessage(ids[0], Message{Role: RoleUser, Content: "bump"}))
	want := []int64{ids[0], ids[4], ids[3], ids[2], ids[1]}
	var got []int64
	for off := 0; off < 6; off += 2 {
		for _, sum := range must(s.List(2, off)) {
			got = append(got, sum.ID)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("paged List order %v, want %v", got, want)
	}
	// Same timestamp: the newer id first.
	s.now = func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }
	a := must(s.NewConversation("a", "m"))
	b := must(s.NewConversation("b", "m"))
	top := must(s.List(2, 0))
	if top[0].ID != b.ID || top[1].ID != a.ID {
		t.Fatalf("tie order %d,%d want %d,%d", top[0].ID, top[1].ID, b.ID, a.ID)
	}
	// A clock stepping back does not move updated_at backwards.
	s.now = func() time.Time { return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }
	must(s.AppendMessage(a.ID, Message{Role: RoleUser, Content: "x"}))
	if got := must(s.Get(a.ID)); !got.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("updated_at went back to %v", got.UpdatedAt)
	}
	// Messages come back in append order even when created_at ties.
	c := must(s.NewConversation("order", "m"))
	for i := range 20 {
		must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: fmt.Sprint(i)}))
	}
	for i, m := range must(s.Get(c.ID)).Messages {
		if m.Content != fmt.Sprint(i) {
			t.Fatalf("message %d has content %q", i, m.Content)
		}
	}
}

func TestSearchEscaping(t *testing.T) {
	s := openTest(t)
	docs := []string{
		"plain text without specials",
		"a discount of 100% today",
		"snake_case_name here",
		`she said "hi" and left`,
		"it's a quote",
		`back\slash`,
		"NEAR(x y) AND title:* OR -z ^start",
		"abcd",
	}
	conv := map[string]int64{}
	for _, d := range docs {
		c := must(s.NewConversation("t", "m"))
		must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: d}))
		conv[d] = c.ID
	}
	cases := []struct {
		q    string
		want []string
	}{
		{"%", []string{"a discount of 100% today"}},    // LIKE path
		{"_", []string{"snake_case_name here"}},        // LIKE path
		{"0%", []string{"a discount of 100% today"}},   // LIKE path
		{"100%", []string{"a discount of 100% today"}}, // FTS path
		{"e_c", []string{"snake_case_name here"}},      // FTS path
		{"a%c", nil}, // % is not a wildcard
		{"a_c", nil}, // _ is not a wildcard
		{`"hi"`, []string{`she said "hi" and left`}},               // quotes literal
		{`"`, []string{`she said "hi" and left`}},                  // lone quote
		{"it's", []string{"it's a quote"}},                         // single quote
		{`\s`, []string{`back\slash`}},                             // escape char itself
		{`k\s`, []string{`back\slash`}},                            // via FTS
		{"NEAR(x", []string{"NEAR(x y) AND title:* OR -z ^start"}}, // FTS syntax literal
		{"title:*", []string{"NEAR(x y) AND title:* OR -z ^start"}},
		{"^start", []string{"NEAR(x y) AND title:* OR -z ^start"}},
		{"ABCD", []string{"abcd"}}, // case-insensitive
		{"*", []string{"NEAR(x y) AND title:* OR -z ^start"}},
	}
	for _, tc := range cases {
		hits, err := s.Search(tc.q, 50)
		if err != nil {
			t.Errorf("Search(%q): %v", tc.q, err)
			continue
		}
		var got []int64
		for _, h := range hits {
			got = append(got, h.ID)
		}
		var want []int64
		for i := len(tc.want) - 1; i >= 0; i-- {
			want = append(want, conv[tc.want[i]])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%q) = %v, want %v (%q)", tc.q, got, want, tc.want)
		}
	}
	// Titles match too, with the same escaping.
	c := must(s.NewConversation("50% off_sale", "m"))
	for _, q := range []string{"50%", "f_s", "%"} {
		hits := must(s.Search(q, 50))
		if len(hits) == 0 || hits[0].ID != c.ID {
			t.Errorf("Search(%q) did not find the title: %+v", q, hits)
		}
	}
}

func TestSearchSnippetAndLimit(t *testing.T) {
	s := openTest(t)
	long := strings.Repeat("lorem ipsum ", 40) + "the NEEDLE is here " + strings.Repeat("dolor sit ", 40)
	for range 3 {
		c := must(s.NewConversation("", "m"))
		must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "first"}))
		must(s.AppendMessage(c.ID, Message{Role: RoleAssistant, Content: long}))
	}
	hits := must(s.Search("needle", 2))
	if len(hits) != 2 {
		t.Fatalf("limit 2 returned %d", len(hits))
	}
	sn := hits[0].Snippet
	if !strings.Contains(sn, "NEEDLE") || !strings.HasPrefix(sn, "…") || !strings.HasSuffix(sn, "…") {
		t.Fatalf("snippet %q", sn)
	}
	if n := len([]rune(sn)); n > snippetRunes+2 {
		t.Fatalf("snippet has %d runes", n)
	}
}

func TestUnicode(t *testing.T) {
	s := openTest(t)
	contents := []string{
		"日本語のテキストです。",
		"Привет, мир! ÉCOLE",
		"emoji 👩‍👩‍👧‍👦 and flags 🇩🇪 ok",
		"עברית ومرحبا mixed RTL",
		"combining: e\u0301 cafe\u0301",
		"tab\tand\r\nCRLF and NUL\x00inside",
	}
	c := must(s.NewConversation("ユニコード ✓", "модель"))
	for _, content := range contents {
		must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: content}))
	}
	got := must(s.Get(c.ID))
	if got.Title != "ユニコード ✓" || got.Model != "модель" {
		t.Fatalf("title/model %q %q", got.Title, got.Model)
	}
	for i, m := range got.Messages {
		if m.Content != contents[i] {
			t.Fatalf("message %d: %q, want %q", i, m.Content, contents[i])
		}
	}
	for _, q := range []string{"日本語", "語", "мир", "école", "МИР", "👩‍👩", "🇩🇪", "ومرحبا", "cafe\u0301", "ユニ"} {
		if hits := must(s.Search(q, 5)); len(hits) != 1 {
			t.Errorf("Search(%q) found %d", q, len(hits))
		}
	}
	md := must(s.ExportMarkdown(c.ID))
	for _, content := range contents {
		if !strings.Contains(md, content) {
			t.Errorf("export lacks %q", content)
		}
	}
}

func TestExportGolden(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("Fizzbuzz in Go", "qwen2.5-coder-7b-q4_k_m"))
	add := func(role Role, content string, st *Stats) {
		must(s.AppendMessage(c.ID, Message{Role: role, Content: content, Stats: st}))
	}
	add(RoleSystem, "You are a helpful assistant.", nil)
	add(RoleUser, "Write fizzbuzz in Go.\nKeep it short.", nil)
	add(RoleAssistant, "Here it is:\n\n```go\nfor i := 1; i <= 15; i++ {\n\tfmt.Println(i)\n}\n```\n\nA ```` fence ```` inline and ~~~ tildes.\n",
		&Stats{Tokens: 57, TokensPerSec: 38.24, TTFT: 212 * time.Millisecond, FinishReason: "stop"})
	add(RoleUser, "# A heading inside a message\nand `code`", nil)
	// Cut off inside a fence: the export closes it so later headings survive.
	add(RoleAssistant, "Sure:\n````md\n```\nnested\n```", &Stats{Tokens: 9, TokensPerSec: 30, TTFT: 1500 * time.Millisecond, FinishReason: "length"})
	add(RoleUser, "", nil)
	md := must(s.ExportMarkdown(c.ID))
	golden := filepath.Join("testdata", "export.golden.md")
	if *update {
		if err := os.WriteFile(golden, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if md != string(want) {
		t.Fatalf("export differs from %s (go test -run TestExportGolden -update):\n%s", golden, md)
	}
}

func TestOpenFence(t *testing.T) {
	for md, want := range map[string]string{
		"":                             "",
		"```go\nx\n```":                "",
		"```go\nx":                     "```",
		"~~~~\n~~~\n":                  "~~~~",
		"~~~~\n~~~~~ \n":               "",
		"````\n```\n":                  "````",
		"``` a`b\nx":                   "", // not an opening fence
		"    ```\nindented code":       "",
		"   ```\nthree spaces":         "```",
		"```\n~~~\n":                   "```",
		"text ``` inline":              "",
		"```\n``` not a closer\n":      "```",
		"```py\r\nx\r\n```\r\n":        "",
		"```\na\n```\n```js\nunclosed": "```",
	} {
		if got := openFence(md); got != want {
			t.Errorf("openFence(%q) = %q, want %q", md, got, want)
		}
	}
}

func TestDeriveTitle(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for in, want := range map[string]string{
		"":                               "",
		"  \n\t\n":                       "",
		"  Hello world  \nsecond line":   "Hello world",
		"\n\n  first\tnon-blank  line\n": "first non-blank line",
		"bad \xff utf8":                  "bad \uFFFD utf8",
		long:                             strings.Repeat("word ", 11) + "word…",
		strings.Repeat("語", 70):          strings.Repeat("語", 59) + "…",
		strings.Repeat("x", 58) + "e\u0301\u0301z": strings.Repeat("x", 58) + "…",
		strings.Repeat("x", 58) + "👩\u200d👧":       strings.Repeat("x", 58) + "…",
	} {
		got := DeriveTitle(in)
		if got != want {
			t.Errorf("DeriveTitle(%q) = %q, want %q", in, got, want)
		}
		if n := len([]rune(got)); n > TitleRunes {
			t.Errorf("DeriveTitle(%q) has %d runes", in, n)
		}
	}
}

func TestBadInput(t *testing.T) {
	s := openTest(t)
	c := must(s.NewConversation("ok", "m"))
	user := must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "u"}))
	errs := map[string]error{}
	try := func(name string, err error) { errs[name] = err }
	_, err := s.NewConversation("two\nlines", "m")
	try("title with newline", err)
	_, err = s.NewConversation(strings.Repeat("x", MaxTitleRunes+1), "m")
	try("long title", err)
	_, err = s.NewConversation("\xff", "m")
	try("invalid UTF-8 title", err)
	_, err = s.NewConversation("t", "\xfe")
	try("invalid UTF-8 model", err)
	_, err = s.AppendMessage(c.ID, Message{Role: "tool", Content: "x"})
	try("unknown role", err)
	_, err = s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "x", Stats: &Stats{}})
	try("stats on user message", err)
	_, err = s.AppendMessage(c.ID, Message{Role: RoleUser, Content: "bad \xff"})
	try("invalid UTF-8 content", err)
	_, err = s.AppendMessage(c.ID, Message{Role: RoleAssistant, Stats: &Stats{TokensPerSec: math.NaN()}})
	try("NaN tok/s", err)
	_, err = s.AppendMessage(c.ID, Message{Role: RoleAssistant, Stats: &Stats{Tokens: -1}})
	try("negative tokens", err)
	try("stats via update of user message", s.UpdateMessage(user.ID, "u", &Stats{}))
	_, err = s.List(0, 0)
	try("zero limit", err)
	_, err = s.List(MaxLimit+1, 0)
	try("huge limit", err)
	_, err = s.List(10, -1)
	try("negative offset", err)
	_, err = s.Search("  ", 10)
	try("empty query", err)
	_, err = s.Search(strings.Repeat("q", maxQueryRunes+1), 10)
	try("long query", err)
	_, err = s.Search("\xff\xfe\xfd", 10)
	try("invalid UTF-8 query", err)
	_, err = s.Search("ab\x00cd", 10)
	try("NUL in query", err)
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// The rejected writes left nothing behind.
	if got := must(s.Get(c.ID)); len(got.Messages) != 1 || got.Title != "ok" {
		t.Fatalf("after rejected writes: %+v", got)
	}

	missing := int64(987654)
	_, errGet := s.Get(missing)
	_, errAppend := s.AppendMessage(missing, Message{Role: RoleUser})
	_, errExport := s.ExportMarkdown(missing)
	for name, err := range map[string]error{
		"Get": errGet, "AppendMessage": errAppend, "ExportMarkdown": errExport,
		"UpdateMessage": s.UpdateMessage(missing, "x", nil),
		"Rename":        s.Rename(missing, "x"),
		"Delete":        s.Delete(missing),
	} {
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "987654") {
			t.Errorf("%s of a missing id: %v, want ErrNotFound naming the id", name, err)
		}
	}

	if _, err := Open(""); err == nil {
		t.Error("Open(\"\"): no error")
	}
	s.Close()
	if _, err := s.List(1, 0); err == nil {
		t.Error("List after Close: no error")
	}
	if _, err := s.NewConversation("x", "m"); err == nil {
		t.Error("NewConversation after Close: no error")
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(i*7 + i/13)
	}
	files := map[string]string{
		"text file":        write("notes.txt", []byte("just some notes, not a database\n")),
		"random bytes":     write("random.bin", garbage),
		"short header":     write("short.db", []byte("SQLite")),
		"corrupt database": write("corrupt.db", append([]byte("SQLite format 3\x00"), garbage...)),
		"directory":        t.TempDir(),
	}
	// A healthy SQLite database of some other application.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE bookmarks (url TEXT); INSERT INTO bookmarks VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	files["other application's database"] = other
	// Nibble history written by a newer build.
	newer := filepath.Join(dir, "newer.db")
	s := must(Open(newer))
	if _, err := s.db.Exec(`INSERT INTO schema_version VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	files["newer schema"] = newer
	// Nibble history cut short (a bad copy or sync).
	full, err := os.ReadFile(newer)
	if err != nil {
		t.Fatal(err)
	}
	files["truncated history"] = write("truncated.db", full[:len(full)/2])

	for name, path := range files {
		before := snapshotDir(t, dir)
		_, err := Open(path)
		if err == nil {
			t.Errorf("%s: Open succeeded", name)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
		if after := snapshotDir(t, dir); !reflect.DeepEqual(before, after) {
			t.Errorf("%s: Open changed files:\nbefore %v\nafter  %v", name, before, after)
		}
	}
}

// snapshotDir maps each file in dir to its size, mtime and content, so a
// test sees any modification, including new -wal or -shm files.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		var sum [sha256.Size]byte
		if !fi.IsDir() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			sum = sha256.Sum256(b)
		}
		out[e.Name()] = fmt.Sprintf("size %d mtime %d sha256 %x", fi.Size(), fi.ModTime().UnixNano(), sum[:8])
	}
	return out
}

func TestPathWithURICharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "we?ird #dir %41")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "h?.db")
	s := must(Open(path))
	must(s.NewConversation("x", "m"))
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the literal path: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := openTest(t)
	const writers, perWriter = 6, 30
	convs := []int64{must(s.NewConversation("a", "m")).ID, must(s.NewConversation("b", "m")).ID}
	var wg sync.WaitGroup
	errc := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				conv := convs[(w+i)%2]
				m, err := s.AppendMessage(conv, Message{Role: RoleAssistant, Content: fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					errc <- err
					return
				}
				if i%5 == 0 {
					if err := s.UpdateMessage(m.ID, fmt.Sprintf("w%d-%d", w, i), &Stats{Tokens: i}); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.List(10, 0); err != nil {
					errc <- err
					return
				}
				if _, err := s.Search("w1-", 10); err != nil {
					errc <- err
					return
				}
				if _, err := s.Get(convs[0]); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Every append landed, and each writer's messages are in its order.
	total := 0
	for _, id := range convs {
		for _, m := range must(s.Get(id)).Messages {
			var w, i int
			if _, err := fmt.Sscanf(m.Content, "w%d-%d", &w, &i); err != nil {
				t.Fatalf("content %q: %v", m.Content, err)
			}
			if (w+i)%2 != int(id-convs[0]) {
				t.Fatalf("message %q in the wrong conversation", m.Content)
			}
			total++
		}
	}
	if total != writers*perWriter {
		t.Fatalf("%d messages, want %d", total, writers*perWriter)
	}
	for _, id := range convs {
		next := make([]int, writers)
		for _, m := range must(s.Get(id)).Messages {
			var w, i int
			fmt.Sscanf(m.Content, "w%d-%d", &w, &i)
			if i < next[w] {
				t.Fatalf("writer %d: message %d after %d", w, i, next[w])
			}
			next[w] = i
		}
	}
	ftsIntegrity(t, s)
}

// Damage past the first pages is found by the operation that reads it; it
// must come back as an error naming the operation, never a panic.
func TestDamagedFileGivesErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := must(Open(path))
	for i := range 40 {
		c := must(s.NewConversation("t", "m"))
		must(s.AppendMessage(c.ID, Message{Role: RoleUser, Content: strings.Repeat("x", 3000+i)}))
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 8192; i < len(b); i += 7 { // pages 1 and 2 intact
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Logf("Open: %v", err)
		return
	}
	defer s.Close()
	_, errList := s.List(100, 0)
	_, errSearch := s.Search("xxx", 10)
	_, errGet := s.Get(3)
	_, errNew := s.NewConversation("x", "m")
	for name, err := range map[string]error{"List": errList, "Search": errSearch, "Get": errGet, "NewConversation": errNew} {
		if err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s on a damaged file: %v, want a malformed-database error", name, err)
		}
	}
}
