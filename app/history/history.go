// Package history keeps the app's conversations in an SQLite file (pure-Go
// driver, so the app builds without cgo). It backs the History pane: list,
// search, restore, rename, delete and Markdown export.
//
// One *Store is safe for use from many goroutines. Every write is one
// transaction in a WAL-mode database with synchronous=FULL: a crash of the
// process (kill -9, panic) loses at most the write in flight and never
// corrupts the file (durability_test.go shows it), and FULL extends that to
// power loss as far as the OS honours fsync.
package history

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Role is who wrote a message.
type Role string

// The roles a message can have; the schema rejects any other.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

func (r Role) valid() bool {
	return r == RoleSystem || r == RoleUser || r == RoleAssistant
}

// Stats describe how an assistant reply was generated. Zero fields are kept
// as they are (a reply stopped before its first token has TTFT 0).
type Stats struct {
	Tokens       int           // generated tokens
	TokensPerSec float64       // decode speed
	TTFT         time.Duration // time to first token (stored to the microsecond)
	FinishReason string        // "stop", "length", "cancelled", ...
	// Thinking is how long a reasoning model thought before it answered
	// (kept to the microsecond; 0 when it did not think).
	Thinking time.Duration
}

// Message is one turn of a conversation. Stats is nil unless the message is
// an assistant reply that recorded them.
type Message struct {
	ID             int64
	ConversationID int64
	Role           Role
	Content        string
	CreatedAt      time.Time // UTC, millisecond precision
	Stats          *Stats
	// Sources are the numbered sources of an answer about documents
	// (assistant replies only; nil for other answers).
	Sources []Source
	// Reasoning is a reasoning model's thinking before Content, the
	// answer (assistant replies only). Search does not look in it.
	Reasoning string
}

// Source is one numbered source an answer had: the document and where in
// it ("page 4", "lines 120–168", "whole document, lines 1–30").
type Source struct {
	Number   int    `json:"number"`
	Document string `json:"document"`
	Label    string `json:"label"`
}

// Conversation is a conversation with, from Get, all its messages in the
// order they were appended.
type Conversation struct {
	ID        int64
	Title     string
	Model     string
	CreatedAt time.Time // UTC, millisecond precision
	UpdatedAt time.Time // last append, update or rename
	Messages  []Message
}

// Summary is one row of the History pane.
type Summary struct {
	ID        int64
	Title     string
	Model     string
	CreatedAt time.Time
	UpdatedAt time.Time
	Messages  int    // number of messages
	Snippet   string // List: the latest non-system message; Search: the match
}

// ErrNotFound is returned (wrapped) when a conversation or message id does
// not exist, e.g. it was deleted from another window.
var ErrNotFound = errors.New("not found")

// Limits on input, so a bad caller gets an error instead of a huge query.
const (
	MaxTitleRunes = 200
	MaxLimit      = 1000 // List and Search return at most this many rows
	maxQueryRunes = 500
)

// Store is an open history database.
type Store struct {
	db   *sql.DB
	path string
	// writeMu serialises writers inside the process: SQLite allows one
	// writer at a time anyway, and waiting here is cheaper and fairer than
	// SQLite's busy-sleep loop. busy_timeout still covers other processes.
	writeMu sync.Mutex
	now     func() time.Time // replaced by tests for stable timestamps
}

// applicationID marks the file as Nibble history ("NbHi") so Open refuses
// other applications' SQLite files instead of adding tables to them.
const applicationID = 0x4E624869

var sqliteMagic = []byte("SQLite format 3\x00")

// Open opens the history database at path, creating the file and its
// schema when missing and migrating an older schema. A file that is not a
// Nibble history database is refused and left untouched.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open history: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	if err := probe(abs); err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	q := url.Values{}
	// immediate: a write transaction takes the lock at BEGIN, so it waits
	// in busy_timeout instead of failing with SQLITE_BUSY on upgrade.
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	// On macOS fsync leaves data in the drive's cache; F_FULLFSYNC at
	// checkpoints keeps the WAL-before-database ordering that prevents
	// corruption on power loss, without its cost on every commit. No-op
	// elsewhere.
	q.Add("_pragma", "checkpoint_fullfsync(1)")
	db, err := sql.Open("sqlite", fileURI(abs, q))
	if err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	// Each connection has its own page cache; a few readers are plenty.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	s := &Store{db: db, path: path, now: time.Now}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database. Calls after Close return errors.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close history %s: %w", s.path, err)
	}
	return nil
}

// fileURI builds an SQLite URI so that '?', '#' and '%' in the path are
// taken literally (the driver would otherwise split the DSN at '?').
func fileURI(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	if u.Path[0] != '/' { // Windows: C:/x needs file:///C:/x
		u.Path = "/" + u.Path
	}
	return u.String()
}

// probe checks, without writing anything, that abs is missing, empty, or
// a Nibble history database. Only then may Open switch the file to WAL and
// create tables, which would modify someone else's file.
func probe(abs string) error {
	if fresh, err := checkHeader(abs); err != nil || fresh {
		return err
	}
	// query_only rather than mode=ro: a read-only connection to a WAL
	// database leaves -wal and -shm files behind, a read-write one removes
	// them on close.
	q := url.Values{}
	q.Set("_query_only", "1")
	q.Set("_busy_timeout", "5000")
	db, err := sql.Open("sqlite", fileURI(abs, q))
	if err != nil {
		return err
	}
	defer db.Close()
	var appID, objects int64
	if err := db.QueryRow("PRAGMA application_id").Scan(&appID); err != nil {
		return fmt.Errorf("unreadable database: %w", err)
	}
	if err := db.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return fmt.Errorf("unreadable database: %w", err)
	}
	switch {
	case appID == applicationID:
		// No quick_check here: it reads every page (~0.5 s for 10k long
		// messages) on each launch; SQLite reports damage where it meets it.
		var version int
		if err := db.QueryRow(`SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&version); err != nil {
			return fmt.Errorf("schema version: %w", err)
		}
		if version > len(migrations) {
			return newerSchema(version)
		}
		return nil
	case objects == 0 && appID == 0:
		return nil // created but the schema never committed
	default:
		return fmt.Errorf("an SQLite database of another application (application_id %#x, %d schema objects), not Nibble history", appID, objects)
	}
}

// checkHeader reports whether abs is missing or empty (a fresh database),
// and fails unless it is a regular file that starts with SQLite's magic.
func checkHeader(abs string) (fresh bool, err error) {
	f, err := os.Open(abs)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.IsDir() {
		return false, errors.New("is a directory")
	}
	if fi.Size() == 0 {
		return true, nil // SQLite treats an empty file as an empty database
	}
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteMagic) {
		return false, errors.New("not an SQLite database (bad header)")
	}
	return false, nil
}

// write runs fn in one immediate transaction, serialised with other writers.
func (s *Store) write(fn func(tx *sql.Tx) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// stamp is the current time at the stored precision, so values returned to
// callers equal what Get reads back.
func (s *Store) stamp() int64 { return s.now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func checkText(what, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	return nil
}
