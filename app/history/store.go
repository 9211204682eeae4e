package history

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// NewConversation starts an empty conversation. The title may be empty
// (set it later with Rename, e.g. from DeriveTitle of the first message).
func (s *Store) NewConversation(title, model string) (Conversation, error) {
	title = strings.TrimSpace(title)
	if err := checkTitle(title); err != nil {
		return Conversation{}, fmt.Errorf("new conversation: %w", err)
	}
	if err := checkText("model name", model); err != nil {
		return Conversation{}, fmt.Errorf("new conversation: %w", err)
	}
	if strings.ContainsAny(model, "\r\n") {
		return Conversation{}, errors.New("new conversation: model name has a line break")
	}
	// Empty, not nil, slices: the Wails front end gets [] rather than null.
	c := Conversation{Title: title, Model: model, Messages: []Message{}}
	err := s.write(func(tx *sql.Tx) error {
		now := s.stamp()
		res, err := tx.Exec(`INSERT INTO conversations (title, model, created_at, updated_at) VALUES (?, ?, ?, ?)`,
			title, model, now, now)
		if err != nil {
			return err
		}
		c.ID, err = res.LastInsertId()
		c.CreatedAt, c.UpdatedAt = fromMillis(now), fromMillis(now)
		return err
	})
	if err != nil {
		return Conversation{}, fmt.Errorf("new conversation in %s: %w", s.path, err)
	}
	return c, nil
}

// AppendMessage adds m (Role, Content and, for assistant replies, Stats)
// to the end of conversation convID and returns it with ID and CreatedAt
// set. m.ID, m.ConversationID and m.CreatedAt are ignored.
func (s *Store) AppendMessage(convID int64, m Message) (Message, error) {
	if !m.Role.valid() {
		return Message{}, fmt.Errorf("append to conversation %d: invalid role %q (want system, user or assistant)", convID, m.Role)
	}
	if err := checkMessage(m.Role, m.Content, m.Stats); err != nil {
		return Message{}, fmt.Errorf("append to conversation %d: %w", convID, err)
	}
	if err := checkReasoning(m.Role, m.Reasoning); err != nil {
		return Message{}, fmt.Errorf("append to conversation %d: %w", convID, err)
	}
	sources, err := sourcesArg(m.Role, m.Sources)
	if err != nil {
		return Message{}, fmt.Errorf("append to conversation %d: %w", convID, err)
	}
	m.ConversationID = convID
	err = s.write(func(tx *sql.Tx) error {
		now := s.stamp()
		if err := touch(tx, convID, now); err != nil {
			return err
		}
		return insertMessage(tx, &m, now, sources)
	})
	if err != nil {
		return Message{}, fmt.Errorf("append to conversation %d: %w", convID, err)
	}
	return m, nil
}

// insertMessage inserts m into its conversation at time now (Unix ms) and
// sets its ID and CreatedAt; sources is the sources column's value.
func insertMessage(tx *sql.Tx, m *Message, now int64, sources any) error {
	tok, tps, ttft, fin := statsArgs(m.Stats)
	var reasoning, thinking any
	if m.Reasoning != "" {
		reasoning = m.Reasoning
	}
	if m.Stats != nil && m.Stats.Thinking > 0 {
		thinking = m.Stats.Thinking.Microseconds()
	}
	res, err := tx.Exec(`INSERT INTO messages
		(conversation_id, role, content, created_at, tokens, tokens_per_sec, ttft_us, finish_reason, sources, reasoning, thinking_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ConversationID, string(m.Role), m.Content, now, tok, tps, ttft, fin, sources, reasoning, thinking)
	if err != nil {
		return err
	}
	m.ID, err = res.LastInsertId()
	m.CreatedAt = fromMillis(now)
	return err
}

// ReplaceLastExchange replaces the last question of conversation convID,
// and every message after it (its replies), with question, in one
// commit: a reply regenerated, or the last question edited and sent
// again. A conversation without a user message just gets question.
func (s *Store) ReplaceLastExchange(convID int64, question string) (Message, error) {
	if err := checkMessage(RoleUser, question, nil); err != nil {
		return Message{}, fmt.Errorf("replace the last exchange of conversation %d: %w", convID, err)
	}
	m := Message{ConversationID: convID, Role: RoleUser, Content: question}
	err := s.write(func(tx *sql.Tx) error {
		now := s.stamp()
		if err := touch(tx, convID, now); err != nil {
			return err
		}
		var last sql.NullInt64
		if err := tx.QueryRow(`SELECT max(id) FROM messages WHERE conversation_id = ? AND role = 'user'`, convID).Scan(&last); err != nil {
			return err
		}
		if last.Valid {
			if _, err := tx.Exec(`DELETE FROM messages WHERE conversation_id = ? AND id >= ?`, convID, last.Int64); err != nil {
				return err
			}
		}
		return insertMessage(tx, &m, now, nil)
	})
	if err != nil {
		return Message{}, fmt.Errorf("replace the last exchange of conversation %d: %w", convID, err)
	}
	return m, nil
}

// UpdateMessage replaces the content and stats of message msgID: a
// streaming reply is appended empty, updated as it grows and finalised
// with its stats. Each call is one fsync'd commit and re-indexes the
// content for search, so throttle updates (say once a second).
func (s *Store) UpdateMessage(msgID int64, content string, stats *Stats) error {
	err := s.write(func(tx *sql.Tx) error {
		var convID int64
		var role Role
		err := tx.QueryRow(`SELECT conversation_id, role FROM messages WHERE id = ?`, msgID).Scan(&convID, &role)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := checkMessage(role, content, stats); err != nil {
			return err
		}
		if err := touch(tx, convID, s.stamp()); err != nil {
			return err
		}
		tok, tps, ttft, fin := statsArgs(stats)
		_, err = tx.Exec(`UPDATE messages SET content = ?, tokens = ?, tokens_per_sec = ?, ttft_us = ?, finish_reason = ?
			WHERE id = ?`, content, tok, tps, ttft, fin, msgID)
		return err
	})
	if err != nil {
		return fmt.Errorf("update message %d: %w", msgID, err)
	}
	return nil
}

// Rename sets the title of conversation convID.
func (s *Store) Rename(convID int64, title string) error {
	title = strings.TrimSpace(title)
	if err := checkTitle(title); err != nil {
		return fmt.Errorf("rename conversation %d: %w", convID, err)
	}
	err := s.write(func(tx *sql.Tx) error {
		if err := touch(tx, convID, s.stamp()); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE conversations SET title = ? WHERE id = ?`, title, convID)
		return err
	})
	if err != nil {
		return fmt.Errorf("rename conversation %d: %w", convID, err)
	}
	return nil
}

// Delete removes conversation convID and its messages.
func (s *Store) Delete(convID int64) error {
	err := s.write(func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM conversations WHERE id = ?`, convID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete conversation %d: %w", convID, err)
	}
	return nil
}

// Get returns conversation convID with all its messages in order.
func (s *Store) Get(convID int64) (Conversation, error) {
	// One statement, so the conversation and its messages come from one
	// snapshot even while another goroutine appends or deletes.
	rows, err := s.db.Query(`SELECT c.title, c.model, c.created_at, c.updated_at,
			m.id, m.role, m.content, m.created_at, m.tokens, m.tokens_per_sec, m.ttft_us, m.finish_reason, m.sources,
			m.reasoning, m.thinking_us
		FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id
		WHERE c.id = ? ORDER BY m.id`, convID)
	if err != nil {
		return Conversation{}, fmt.Errorf("get conversation %d: %w", convID, err)
	}
	defer rows.Close()
	c := Conversation{ID: convID, Messages: []Message{}}
	found := false
	for rows.Next() {
		var created, updated int64
		var mid, mcreated, tok, ttft, thinking sql.NullInt64
		var role, content, fin, sources, reasoning sql.NullString
		var tps sql.NullFloat64
		if err := rows.Scan(&c.Title, &c.Model, &created, &updated,
			&mid, &role, &content, &mcreated, &tok, &tps, &ttft, &fin, &sources, &reasoning, &thinking); err != nil {
			return Conversation{}, fmt.Errorf("get conversation %d: %w", convID, err)
		}
		found = true
		c.CreatedAt, c.UpdatedAt = fromMillis(created), fromMillis(updated)
		if !mid.Valid {
			continue // LEFT JOIN row of a conversation without messages
		}
		m := Message{ID: mid.Int64, ConversationID: convID, Role: Role(role.String),
			Content: content.String, CreatedAt: fromMillis(mcreated.Int64), Reasoning: reasoning.String}
		if tok.Valid || tps.Valid || ttft.Valid || fin.Valid {
			m.Stats = &Stats{Tokens: int(tok.Int64), TokensPerSec: tps.Float64,
				TTFT: time.Duration(ttft.Int64) * time.Microsecond, FinishReason: fin.String,
				Thinking: time.Duration(thinking.Int64) * time.Microsecond}
		}
		if sources.Valid {
			// Written by sourcesArg; a damaged value loses the sources, not the message.
			_ = json.Unmarshal([]byte(sources.String), &m.Sources)
		}
		c.Messages = append(c.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return Conversation{}, fmt.Errorf("get conversation %d: %w", convID, err)
	}
	if !found {
		return Conversation{}, fmt.Errorf("get conversation %d: %w", convID, ErrNotFound)
	}
	return c, nil
}

// List returns conversations newest (last updated) first, for paging
// through the History pane.
func (s *Store) List(limit, offset int) ([]Summary, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("list conversations: offset %d is negative", offset)
	}
	rows, err := s.db.Query(`SELECT c.id, c.title, c.model, c.created_at, c.updated_at,
			(SELECT count(*) FROM messages WHERE conversation_id = c.id),
			coalesce((SELECT substr(content, 1, ?) FROM messages
				WHERE conversation_id = c.id AND role <> 'system' ORDER BY id DESC LIMIT 1), '')
		FROM conversations c ORDER BY c.updated_at DESC, c.id DESC LIMIT ? OFFSET ?`,
		snippetRunes*4, limit, offset)
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	out, err := scanSummaries(rows, func(content string) string { return snippet(content) })
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	return out, nil
}

// scanSummaries reads rows of (id, title, model, created, updated, count,
// text) and makes text into the snippet with mk.
func scanSummaries(rows *sql.Rows, mk func(string) string) ([]Summary, error) {
	defer rows.Close()
	out := []Summary{}
	for rows.Next() {
		var sum Summary
		var created, updated int64
		var text string
		if err := rows.Scan(&sum.ID, &sum.Title, &sum.Model, &created, &updated, &sum.Messages, &text); err != nil {
			return nil, err
		}
		sum.CreatedAt, sum.UpdatedAt = fromMillis(created), fromMillis(updated)
		sum.Snippet = mk(text)
		out = append(out, sum)
	}
	return out, rows.Err()
}

// touch bumps a conversation's updated_at, never backwards (the clock may
// step back), and reports ErrNotFound for a missing conversation.
func touch(tx *sql.Tx, convID, now int64) error {
	res, err := tx.Exec(`UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?`, now, convID)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

func statsArgs(st *Stats) (tokens, tps, ttftUS, finish any) {
	if st == nil {
		return nil, nil, nil, nil
	}
	return int64(st.Tokens), st.TokensPerSec, st.TTFT.Microseconds(), st.FinishReason
}

func checkMessage(role Role, content string, st *Stats) error {
	if err := checkText("content", content); err != nil {
		return err
	}
	if st == nil {
		return nil
	}
	if role != RoleAssistant {
		return fmt.Errorf("stats given for a %s message (only assistant replies have them)", role)
	}
	switch {
	case st.Tokens < 0:
		return fmt.Errorf("stats: negative token count %d", st.Tokens)
	case st.TTFT < 0:
		return fmt.Errorf("stats: negative time to first token %v", st.TTFT)
	case math.IsNaN(st.TokensPerSec) || math.IsInf(st.TokensPerSec, 0) || st.TokensPerSec < 0:
		return fmt.Errorf("stats: tokens per second %v is not a finite non-negative number", st.TokensPerSec)
	case st.Thinking < 0:
		return fmt.Errorf("stats: negative thinking time %v", st.Thinking)
	}
	return checkText("finish reason", st.FinishReason)
}

// checkReasoning refuses reasoning on a message other than a reply.
func checkReasoning(role Role, reasoning string) error {
	if reasoning == "" {
		return nil
	}
	if role != RoleAssistant {
		return fmt.Errorf("reasoning given for a %s message (only assistant replies have it)", role)
	}
	return checkText("reasoning", reasoning)
}

func checkTitle(title string) error {
	if err := checkText("title", title); err != nil {
		return err
	}
	if strings.ContainsAny(title, "\r\n") {
		return errors.New("title has a line break (titles are one line)")
	}
	if n := utf8.RuneCountInString(title); n > MaxTitleRunes {
		return fmt.Errorf("title has %d characters (at most %d)", n, MaxTitleRunes)
	}
	return nil
}

func checkLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return fmt.Errorf("limit %d out of range 1..%d", limit, MaxLimit)
	}
	return nil
}

// maxSources bounds the sources kept with one answer.
const maxSources = 1000

// sourcesArg is the sources column of a message: NULL when it has none.
func sourcesArg(role Role, sources []Source) (any, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	if role != RoleAssistant {
		return nil, fmt.Errorf("sources given for a %s message (only assistant replies have them)", role)
	}
	if len(sources) > maxSources {
		return nil, fmt.Errorf("%d sources: at most %d", len(sources), maxSources)
	}
	for i, src := range sources {
		if err := checkText(fmt.Sprintf("source %d's document name", i+1), src.Document); err != nil {
			return nil, err
		}
		if err := checkText(fmt.Sprintf("source %d's label", i+1), src.Label); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(sources)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
