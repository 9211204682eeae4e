package history

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// snippetRunes is how much text a Summary's snippet shows.
const snippetRunes = 120

// Search finds conversations whose title or any message contains query
// (case-insensitive substring, any script), newest first, each with a
// snippet around its first matching message. Queries of 3+ characters use
// the FTS5 trigram index; shorter ones, which trigrams cannot match, scan
// with LIKE. Characters such as % _ " * are matched literally; NUL is
// refused. Titles match by LIKE, case-insensitive for ASCII only.
func (s *Store) Search(query string, limit int) ([]Summary, error) {
	q := strings.TrimSpace(query)
	if q == "" {
		return nil, errors.New("search: empty query")
	}
	if err := checkText("query", q); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	// SQLite reads MATCH and LIKE patterns as C strings.
	if strings.ContainsRune(q, 0) {
		return nil, errors.New("search: query contains a NUL character")
	}
	if n := utf8.RuneCountInString(q); n > maxQueryRunes {
		return nil, fmt.Errorf("search: query has %d characters (at most %d)", n, maxQueryRunes)
	}
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	like := "%" + escapeLike(q) + "%"
	var hits, arg string
	if utf8.RuneCountInString(q) >= 3 {
		// One FTS5 string token: inside "..." only '"' is special (doubled),
		// so operators, column filters and wildcards in q stay literal.
		arg = `"` + strings.ReplaceAll(q, `"`, `""`) + `"`
		hits = `SELECT m.conversation_id AS cid, min(m.id) AS mid
			FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
			WHERE messages_fts MATCH ? GROUP BY m.conversation_id`
	} else {
		arg = like
		hits = `SELECT conversation_id AS cid, min(id) AS mid
			FROM messages WHERE content LIKE ? ESCAPE '\' GROUP BY conversation_id`
	}
	rows, err := s.db.Query(`WITH hits AS (`+hits+`)
		SELECT c.id, c.title, c.model, c.created_at, c.updated_at,
			(SELECT count(*) FROM messages WHERE conversation_id = c.id),
			coalesce(m.content, (SELECT content FROM messages
				WHERE conversation_id = c.id AND role <> 'system' ORDER BY id DESC LIMIT 1), '')
		FROM conversations c LEFT JOIN hits h ON h.cid = c.id LEFT JOIN messages m ON m.id = h.mid
		WHERE h.cid IS NOT NULL OR c.title LIKE ? ESCAPE '\'
		ORDER BY c.updated_at DESC, c.id DESC LIMIT ?`, arg, like, limit)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q, err)
	}
	out, err := scanSummaries(rows, func(content string) string { return snippetAround(content, q) })
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q, err)
	}
	return out, nil
}

// escapeLike makes s match literally in LIKE ... ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// snippet is the start of content, whitespace runs collapsed, with "…"
// where it was cut.
func snippet(content string) string {
	return cut(collapse(content), 0)
}

// snippetAround centres the snippet a little before the first
// case-insensitive occurrence of q, or starts at the beginning.
func snippetAround(content, q string) string {
	text := collapse(content)
	at := indexFold(text, collapse(q))
	return cut(text, max(0, at-snippetRunes/4))
}

func cut(text []rune, start int) string {
	if start >= len(text) {
		start = 0
	}
	end := min(len(text), start+snippetRunes)
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	b.WriteString(string(text[start:end]))
	if end < len(text) {
		b.WriteString("…")
	}
	return b.String()
}

// collapse turns every whitespace run into one space and trims the ends:
// a snippet is one line in the History pane.
func collapse(s string) []rune {
	out := make([]rune, 0, len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
	}
	return out
}

// indexFold returns the rune index of q in text under simple case folding,
// or -1.
func indexFold(text, q []rune) int {
	if len(q) == 0 {
		return -1
	}
outer:
	for i := 0; i+len(q) <= len(text); i++ {
		for j, r := range q {
			if !runeEqualFold(text[i+j], r) {
				continue outer
			}
		}
		return i
	}
	return -1
}

func runeEqualFold(a, b rune) bool {
	return a == b || unicode.ToLower(a) == unicode.ToLower(b) || unicode.ToUpper(a) == unicode.ToUpper(b)
}
