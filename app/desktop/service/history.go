package service

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"nibble/app/history"
)

// historyLimit is how many conversations the History pane lists.
const historyLimit = 500

// turn is where one Send is kept: its conversation (0: not kept) and
// whether Send created it.
type turn struct {
	convID  int64
	created bool
	sources []Source // of a question about documents, kept with the reply
}

// errNoHistory says why the history methods cannot work.
func (s *Service) errNoHistory() error {
	return fmt.Errorf("conversations are not being kept: %w", s.histErr)
}

// recordTurn keeps the user's side of req before the reply starts. A new
// conversation (ConversationID 0, or one deleted meanwhile) is named after
// the first user message and gets every message of req except the system
// prompt; an existing one gets the last user message. Failures are
// reported in Status rather than stopping the chat.
func (s *Service) recordTurn(req SendRequest) turn {
	if s.hist == nil {
		return turn{}
	}
	var msgs []Message
	if len(req.Messages) == 0 {
		msgs = []Message{{Role: "user", Content: req.Prompt}}
	} else {
		for _, m := range req.Messages {
			if m.Role != "system" {
				msgs = append(msgs, m)
			}
		}
	}
	if len(msgs) == 0 { // only a system prompt: nothing of the user's to keep
		return turn{}
	}
	t := turn{convID: req.ConversationID}
	if t.convID != 0 {
		// Only the new message: the earlier ones were kept by earlier turns.
		last := msgs[len(msgs)-1:]
		if err := s.appendMessages(t.convID, last); err == nil {
			s.emit(EventHistory, HistoryChanged{ID: t.convID})
			return t
		} else if !errors.Is(err, history.ErrNotFound) {
			s.historyFailed(err)
			return turn{}
		}
		// Deleted from the History pane while the chat was open: keep the
		// turns in a new conversation.
	}
	title := ""
	for _, m := range msgs {
		if m.Role == "user" {
			title = history.DeriveTitle(m.Content)
			break
		}
	}
	model := ""
	if info, ok := s.engine().Info(); ok {
		model = modelOf(info).Name
		s.mu.Lock()
		if s.demo {
			model = DemoName
		}
		s.mu.Unlock()
	}
	if ep, ok := s.activeRemote(); ok {
		model = ep.Name + " (remote)"
	}
	c, err := s.hist.NewConversation(title, strings.ToValidUTF8(strings.ReplaceAll(model, "\n", " "), "?"))
	if err != nil {
		s.historyFailed(err)
		return turn{}
	}
	t = turn{convID: c.ID, created: true}
	if err := s.appendMessages(t.convID, msgs); err != nil {
		s.historyFailed(err)
	}
	s.emit(EventHistory, HistoryChanged{ID: t.convID})
	return t
}

func (s *Service) appendMessages(convID int64, msgs []Message) error {
	for _, m := range msgs {
		if _, err := s.hist.AppendMessage(convID, history.Message{Role: history.Role(m.Role),
			Content: strings.ToValidUTF8(m.Content, "\uFFFD")}); err != nil {
			return err
		}
	}
	return nil
}

// dropTurn undoes recordTurn's new conversation when the reply could not
// start (the prompt is too long, the engine is busy): the user sees an
// error, not a turn. A message added to an existing conversation stays,
// since the history has no way to delete one message.
func (s *Service) dropTurn(t turn) {
	if !t.created {
		return
	}
	if err := s.hist.Delete(t.convID); err == nil {
		s.emit(EventHistory, HistoryChanged{ID: t.convID})
	}
}

// recordReply keeps a finished reply: its text (for a stopped one, what
// had streamed) and its stats. Errors are not kept, nor is a reply
// stopped before its first word.
func (s *Service) recordReply(t turn, f Final, shown string) {
	if s.hist == nil || t.convID == 0 || f.FinishReason == "error" {
		return
	}
	text := f.Text
	if f.FinishReason == "cancelled" {
		text = shown // what the window shows; the engine may hold back a partial stop string
	}
	if strings.TrimSpace(text) == "" && f.FinishReason == "cancelled" {
		return
	}
	st := &history.Stats{Tokens: f.GenTokens, TokensPerSec: f.DecodeTokPerSec,
		TTFT: time.Duration(f.TTFTMs * float64(time.Millisecond)), FinishReason: f.FinishReason}
	var sources []history.Source
	for _, src := range t.sources {
		sources = append(sources, history.Source{Number: src.Number, Document: strings.ToValidUTF8(src.Document, "\uFFFD"), Label: src.Label})
	}
	if _, err := s.hist.AppendMessage(t.convID, history.Message{Role: history.RoleAssistant,
		Content: strings.ToValidUTF8(text, "\uFFFD"), Stats: st, Sources: sources}); err != nil {
		if !errors.Is(err, history.ErrNotFound) { // deleted while it was generated
			s.historyFailed(err)
		}
		return
	}
	s.emit(EventHistory, HistoryChanged{ID: t.convID})
}

// historyFailed tells the window, through Status, that a turn was not
// kept; the chat itself goes on.
func (s *Service) historyFailed(err error) {
	s.mu.Lock()
	if s.err == "" {
		s.err = "this conversation is not being kept: " + err.Error()
	}
	s.mu.Unlock()
	s.emit(EventStatus, s.Status())
}

// Conversations lists kept conversations, newest first, or those whose
// title or messages contain query when it is not blank.
func (s *Service) Conversations(query string) ([]ConversationSummary, error) {
	if s.hist == nil {
		return nil, s.errNoHistory()
	}
	var (
		rows []history.Summary
		err  error
	)
	if strings.TrimSpace(query) == "" {
		rows, err = s.hist.List(historyLimit, 0)
	} else {
		rows, err = s.hist.Search(query, historyLimit)
	}
	if err != nil {
		return nil, err
	}
	out := make([]ConversationSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, ConversationSummary{ID: r.ID, Title: r.Title, Model: r.Model,
			UpdatedAt: r.UpdatedAt.Format(time.RFC3339), Messages: r.Messages, Snippet: r.Snippet})
	}
	return out, nil
}

// Conversation restores kept conversation id.
func (s *Service) Conversation(id int64) (Conversation, error) {
	if s.hist == nil {
		return Conversation{}, s.errNoHistory()
	}
	c, err := s.hist.Get(id)
	if err != nil {
		return Conversation{}, err
	}
	out := Conversation{ID: c.ID, Title: c.Title, Model: c.Model, Messages: make([]StoredMessage, 0, len(c.Messages))}
	for _, m := range c.Messages {
		sm := StoredMessage{Role: string(m.Role), Content: m.Content}
		if m.Stats != nil {
			sm.Stats = &ReplyStats{FinishReason: m.Stats.FinishReason, GenTokens: m.Stats.Tokens,
				TTFTMs: float64(m.Stats.TTFT.Microseconds()) / 1000, DecodeTokPerSec: m.Stats.TokensPerSec}
		}
		for _, src := range m.Sources {
			sm.Sources = append(sm.Sources, Source{Number: src.Number, Document: src.Document, Label: src.Label})
		}
		out.Messages = append(out.Messages, sm)
	}
	return out, nil
}

// DeleteConversation deletes kept conversation id.
func (s *Service) DeleteConversation(id int64) error {
	if s.hist == nil {
		return s.errNoHistory()
	}
	if err := s.hist.Delete(id); err != nil {
		return err
	}
	s.emit(EventHistory, HistoryChanged{ID: id})
	return nil
}

// ExportConversation is kept conversation id as Markdown.
func (s *Service) ExportConversation(id int64) (string, error) {
	if s.hist == nil {
		return "", s.errNoHistory()
	}
	return s.hist.ExportMarkdown(id)
}
