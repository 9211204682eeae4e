package history

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
)

// Document is a document attached to a conversation, kept with the text
// that was read from it: reopening the conversation attaches it again, and
// a follow-up question gets the same text (and, when it went in whole, the
// same prompt) as before.
type Document struct {
	ID             int64
	ConversationID int64
	Name           string // the file's name
	Kind           string // the format it was read as ("text", "pdf", ...)
	Language       string // of source code
	Title          string
	// Path is the file it was read from ("" for bytes without a path: a
	// file dropped on a page); Size and SHA256 (hex) are the file's as it
	// was read, so a caller can tell whether it changed since.
	Path   string
	Size   int64
	SHA256 string
	Text   string
	// Pages are a PDF's pages: their numbers and byte ranges in Text.
	Pages    []DocumentPage
	Warnings []string
}

// DocumentPage is one page's byte range [Start, End) in a Document's Text.
type DocumentPage struct {
	Number int `json:"number"`
	Start  int `json:"start"`
	End    int `json:"end"`
}

// maxDocuments bounds the documents kept with one conversation.
const maxDocuments = 100

// key says which kept document d is: the same name read from the same
// bytes.
func (d Document) key() string { return d.SHA256 + "\x00" + d.Name }

// SetDocuments makes docs, in that order, the documents attached to
// conversation convID: those already kept (the same name and SHA256) stay
// as they are, new ones are added with their text, and the others are
// removed. One transaction: a crash leaves the previous set.
func (s *Store) SetDocuments(convID int64, docs []Document) error {
	if len(docs) > maxDocuments {
		return fmt.Errorf("keep the documents of conversation %d: %d documents, at most %d", convID, len(docs), maxDocuments)
	}
	for i, d := range docs {
		if err := checkDocument(d); err != nil {
			return fmt.Errorf("keep the documents of conversation %d: document %d: %w", convID, i+1, err)
		}
	}
	err := s.write(func(tx *sql.Tx) error {
		if err := touch(tx, convID, s.stamp()); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT id, name, sha256 FROM documents WHERE conversation_id = ?`, convID)
		if err != nil {
			return err
		}
		// The same file may be attached twice: each key lists its rows.
		have := map[string][]int64{}
		for rows.Next() {
			var d Document
			if err := rows.Scan(&d.ID, &d.Name, &d.SHA256); err != nil {
				rows.Close()
				return err
			}
			have[d.key()] = append(have[d.key()], d.ID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := s.stamp()
		for pos, d := range docs {
			if ids := have[d.key()]; len(ids) > 0 {
				have[d.key()] = ids[1:]
				if _, err := tx.Exec(`UPDATE documents SET position = ? WHERE id = ?`, pos, ids[0]); err != nil {
					return err
				}
				continue
			}
			pages, warnings, err := documentJSON(d)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO documents
				(conversation_id, position, name, kind, language, title, path, size, sha256, text, pages, warnings, added_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				convID, pos, d.Name, d.Kind, d.Language, d.Title, d.Path, d.Size, d.SHA256, d.Text, pages, warnings, now); err != nil {
				return err
			}
		}
		for _, ids := range have {
			for _, id := range ids {
				if _, err := tx.Exec(`DELETE FROM documents WHERE id = ?`, id); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("keep the documents of conversation %d: %w", convID, err)
	}
	return nil
}

// Documents returns the documents attached to conversation convID, in
// order, with their text (none for a conversation kept before documents
// were, or one that never had any).
func (s *Store) Documents(convID int64) ([]Document, error) {
	rows, err := s.db.Query(`SELECT id, name, kind, language, title, path, size, sha256, text, pages, warnings
		FROM documents WHERE conversation_id = ? ORDER BY position, id`, convID)
	if err != nil {
		return nil, fmt.Errorf("documents of conversation %d: %w", convID, err)
	}
	defer rows.Close()
	out := []Document{}
	for rows.Next() {
		d := Document{ConversationID: convID}
		var pages, warnings sql.NullString
		if err := rows.Scan(&d.ID, &d.Name, &d.Kind, &d.Language, &d.Title, &d.Path, &d.Size, &d.SHA256, &d.Text, &pages, &warnings); err != nil {
			return nil, fmt.Errorf("documents of conversation %d: %w", convID, err)
		}
		// Written by documentJSON; a damaged value loses the pages (the
		// citations say lines instead) or the warnings, not the document.
		if pages.Valid {
			_ = json.Unmarshal([]byte(pages.String), &d.Pages)
		}
		if warnings.Valid {
			_ = json.Unmarshal([]byte(warnings.String), &d.Warnings)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("documents of conversation %d: %w", convID, err)
	}
	return out, nil
}

func checkDocument(d Document) error {
	if strings.TrimSpace(d.Name) == "" {
		return fmt.Errorf("no name")
	}
	if d.Size < 0 {
		return fmt.Errorf("%s: negative size %d", d.Name, d.Size)
	}
	if d.SHA256 == "" {
		return fmt.Errorf("%s: no SHA-256 of its file", d.Name)
	}
	for what, v := range map[string]string{"name": d.Name, "kind": d.Kind, "language": d.Language, "title": d.Title,
		"path": d.Path, "text": d.Text} {
		if err := checkText(d.Name+"'s "+what, v); err != nil {
			return err
		}
	}
	for i, p := range d.Pages {
		if p.Start < 0 || p.End < p.Start || p.End > len(d.Text) {
			return fmt.Errorf("%s: page %d's range [%d, %d) is outside its text of %d bytes", d.Name, i+1, p.Start, p.End, len(d.Text))
		}
	}
	for _, w := range d.Warnings {
		if err := checkText(d.Name+"'s warning", w); err != nil {
			return err
		}
	}
	return nil
}

// documentJSON is d's pages and warnings columns: NULL when empty.
func documentJSON(d Document) (pages, warnings any, err error) {
	if len(d.Pages) > 0 {
		b, err := json.Marshal(d.Pages)
		if err != nil {
			return nil, nil, err
		}
		pages = string(b)
	}
	if len(d.Warnings) > 0 {
		b, err := json.Marshal(d.Warnings)
		if err != nil {
			return nil, nil, err
		}
		warnings = string(b)
	}
	return pages, warnings, nil
}
