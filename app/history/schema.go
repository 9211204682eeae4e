package history

import (
	"database/sql"
	"fmt"
)

// migrations[i] takes the schema from version i to i+1. Append new steps;
// never edit a released one, since files in the field already ran it.
var migrations = []string{
	// v1. AUTOINCREMENT so a deleted id is never reused: a UI holding a
	// stale id must get ErrNotFound, not another conversation. Times are
	// Unix milliseconds (UTC). Stats columns are NULL unless an assistant
	// reply recorded them. messages_fts indexes content by trigrams, so
	// search finds any substring of 3+ characters in any script.
	fmt.Sprintf(`
PRAGMA application_id = %d;

CREATE TABLE conversations (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	title      TEXT    NOT NULL,
	model      TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_by_update ON conversations (updated_at DESC, id DESC);

CREATE TABLE messages (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	role            TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
	content         TEXT    NOT NULL,
	created_at      INTEGER NOT NULL,
	tokens          INTEGER CHECK (tokens >= 0),
	tokens_per_sec  REAL,
	ttft_us         INTEGER,
	finish_reason   TEXT,
	CHECK (role = 'assistant' OR (tokens IS NULL AND tokens_per_sec IS NULL
		AND ttft_us IS NULL AND finish_reason IS NULL))
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, id);

CREATE VIRTUAL TABLE messages_fts USING fts5 (
	content, content = 'messages', content_rowid = 'id', tokenize = 'trigram'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
	INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
	INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
	INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
`, applicationID),
	// v2. The sources an answer about documents cited, as a JSON array of
	// {number, document, label}; NULL for other messages.
	`ALTER TABLE messages ADD COLUMN sources TEXT;`,
	// v3. The documents attached to a conversation, with their extracted
	// text, so that reopening it attaches them again. path and sha256 say
	// which file the text came from (path '' for bytes without one), so
	// that a file changed or gone since can be reported; pages and
	// warnings are JSON arrays, NULL when empty.
	`
CREATE TABLE documents (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
	position        INTEGER NOT NULL,
	name            TEXT    NOT NULL,
	kind            TEXT    NOT NULL,
	language        TEXT    NOT NULL DEFAULT '',
	title           TEXT    NOT NULL DEFAULT '',
	path            TEXT    NOT NULL DEFAULT '',
	size            INTEGER NOT NULL CHECK (size >= 0),
	sha256          TEXT    NOT NULL,
	text            TEXT    NOT NULL,
	pages           TEXT,
	warnings        TEXT,
	added_at        INTEGER NOT NULL
);
CREATE INDEX documents_by_conversation ON documents (conversation_id, position);
`,
	// v4. A reasoning model's thinking, kept apart from the answer it
	// preceded, and how long it thought in microseconds; NULL for other
	// messages.
	`
ALTER TABLE messages ADD COLUMN reasoning TEXT;
ALTER TABLE messages ADD COLUMN thinking_us INTEGER CHECK (thinking_us >= 0);
`,
}

// migrate brings the schema up to date in one transaction, so a crash
// mid-migration leaves the previous version intact.
func (s *Store) migrate() error {
	return s.write(func(tx *sql.Tx) error {
		if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_version (
			version    INTEGER PRIMARY KEY,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("schema_version: %w", err)
		}
		var have int
		if err := tx.QueryRow(`SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return fmt.Errorf("schema version: %w", err)
		}
		if have > len(migrations) {
			return newerSchema(have)
		}
		for v := have; v < len(migrations); v++ {
			if _, err := tx.Exec(migrations[v]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v+1, s.stamp()); err != nil {
				return fmt.Errorf("record schema version %d: %w", v+1, err)
			}
		}
		return nil
	})
}

func newerSchema(v int) error {
	return fmt.Errorf("schema version %d is newer than this build knows (%d); update Nibble", v, len(migrations))
}
