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
func (c *chatPart) errNoHistory() error {
	return fmt.Errorf("conversations are not being kept: %w", c.histErr)
}

// recordTurn keeps the user's side of req before the reply starts. A new
// conversation (ConversationID 0, or one deleted meanwhile) is named after
// the first user message and gets every message of req except the system
// prompt; an existing one gets the last user message. Failures are
// reported in Status rather than stopping the chat.
func (c *chatPart) recordTurn(req SendRequest) turn {
	if c.hist == nil {
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
		if err := c.appendMessages(t.convID, last); err == nil {
			c.emit(EventHistory, HistoryChanged{ID: t.convID})
			return t
		} else if !errors.Is(err, history.ErrNotFound) {
			c.historyFailed(err)
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
	if info, ok := c.engine.engine().Info(); ok {
		model = modelOf(info).Name
		if c.engine.isDemo() {
			model = DemoName
		}
	}
	if ep, ok := c.remote.active(); ok {
		model = ep.Name + " (remote)"
	}
	conv, err := c.hist.NewConversation(title, strings.ToValidUTF8(strings.ReplaceAll(model, "\n", " "), "?"))
	if err != nil {
		c.historyFailed(err)
		return turn{}
	}
	t = turn{convID: conv.ID, created: true}
	if err := c.appendMessages(t.convID, msgs); err != nil {
		c.historyFailed(err)
	}
	c.emit(EventHistory, HistoryChanged{ID: t.convID})
	return t
}

// replaceTurn keeps a turn that replaces its conversation's last exchange
// (SendRequest.ReplaceLast): the last question and its replies give way
// to req's last message. Without a conversation, or when it was deleted
// meanwhile, it is kept as recordTurn keeps a turn.
func (c *chatPart) replaceTurn(req SendRequest) turn {
	if c.hist == nil || req.ConversationID == 0 {
		return c.recordTurn(req)
	}
	question := strings.ToValidUTF8(req.Messages[len(req.Messages)-1].Content, "\uFFFD")
	if _, err := c.hist.ReplaceLastExchange(req.ConversationID, question); err != nil {
		if errors.Is(err, history.ErrNotFound) {
			return c.recordTurn(req)
		}
		c.historyFailed(err)
		return turn{}
	}
	c.emit(EventHistory, HistoryChanged{ID: req.ConversationID})
	return turn{convID: req.ConversationID}
}

// keepDocuments keeps the documents ids, the ones this turn asks about,
// with its conversation: reopening it attaches them again. A question
// without documents in a conversation that had some detaches them.
func (c *chatPart) keepDocuments(t turn, ids []string) {
	if c.hist == nil || t.convID == 0 || (t.created && len(ids) == 0) {
		return
	}
	kept, err := c.docs.keptDocuments(ids)
	if err == nil {
		err = c.hist.SetDocuments(t.convID, kept)
	}
	if err != nil && !errors.Is(err, history.ErrNotFound) {
		c.noteProblem("this conversation's documents are not being kept: " + err.Error())
	}
}

func (c *chatPart) appendMessages(convID int64, msgs []Message) error {
	for _, m := range msgs {
		if _, err := c.hist.AppendMessage(convID, history.Message{Role: history.Role(m.Role),
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
func (c *chatPart) dropTurn(t turn) {
	if !t.created {
		return
	}
	if err := c.hist.Delete(t.convID); err == nil {
		c.emit(EventHistory, HistoryChanged{ID: t.convID})
	}
}

// recordReply keeps a finished reply: its text (for a stopped one, what
// had streamed) and its stats. Errors are not kept, nor is a reply
// stopped before its first word.
func (c *chatPart) recordReply(t turn, f Final, shown *streamed) {
	if c.hist == nil || t.convID == 0 || f.FinishReason == "error" {
		return
	}
	text, reasoning := f.Text, f.Reasoning
	if f.FinishReason == "cancelled" {
		// What the window shows; the engine may hold back a partial stop string.
		text, reasoning = shown.text.String(), shown.reasoning.String()
	}
	if strings.TrimSpace(text) == "" && strings.TrimSpace(reasoning) == "" && f.FinishReason == "cancelled" {
		return
	}
	st := &history.Stats{Tokens: f.GenTokens, TokensPerSec: f.DecodeTokPerSec,
		TTFT: time.Duration(f.TTFTMs * float64(time.Millisecond)), FinishReason: f.FinishReason,
		Thinking: time.Duration(f.ThinkingMs * float64(time.Millisecond))}
	var sources []history.Source
	for _, src := range t.sources {
		sources = append(sources, history.Source{Number: src.Number, Document: strings.ToValidUTF8(src.Document, "\uFFFD"), Label: src.Label})
	}
	if _, err := c.hist.AppendMessage(t.convID, history.Message{Role: history.RoleAssistant,
		Content: strings.ToValidUTF8(text, "\uFFFD"), Reasoning: strings.ToValidUTF8(reasoning, "\uFFFD"),
		Stats: st, Sources: sources}); err != nil {
		if !errors.Is(err, history.ErrNotFound) { // deleted while it was generated
			c.historyFailed(err)
		}
		return
	}
	c.emit(EventHistory, HistoryChanged{ID: t.convID})
}

// historyFailed tells the window, through Status, that a turn was not
// kept; the chat itself goes on.
func (c *chatPart) historyFailed(err error) {
	c.noteProblem("this conversation is not being kept: " + err.Error())
}

// conversations lists kept conversations, newest first, or those whose
// title or messages contain query when it is not blank.
func (c *chatPart) conversations(query string) ([]ConversationSummary, error) {
	if c.hist == nil {
		return nil, c.errNoHistory()
	}
	var (
		rows []history.Summary
		err  error
	)
	if strings.TrimSpace(query) == "" {
		rows, err = c.hist.List(historyLimit, 0)
	} else {
		rows, err = c.hist.Search(query, historyLimit)
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

// conversation restores kept conversation id.
func (c *chatPart) conversation(id int64) (Conversation, error) {
	if c.hist == nil {
		return Conversation{}, c.errNoHistory()
	}
	conv, err := c.hist.Get(id)
	if err != nil {
		return Conversation{}, err
	}
	out := Conversation{ID: conv.ID, Title: conv.Title, Model: conv.Model, Messages: make([]StoredMessage, 0, len(conv.Messages))}
	for _, m := range conv.Messages {
		sm := StoredMessage{Role: string(m.Role), Content: m.Content, Reasoning: m.Reasoning}
		if m.Stats != nil {
			sm.Stats = &ReplyStats{FinishReason: m.Stats.FinishReason, GenTokens: m.Stats.Tokens,
				TTFTMs: millis(m.Stats.TTFT), DecodeTokPerSec: m.Stats.TokensPerSec, ThinkingMs: millis(m.Stats.Thinking)}
		}
		for _, src := range m.Sources {
			sm.Sources = append(sm.Sources, Source{Number: src.Number, Document: src.Document, Label: src.Label})
		}
		out.Messages = append(out.Messages, sm)
	}
	return out, nil
}

// openConversation restores kept conversation id for the chat to go on
// with: its messages, and its documents attached again (their chips). Names
// its last answer cites that were not kept are listed, so the window can
// say so rather than answer without them.
func (c *chatPart) openConversation(id int64) (Conversation, error) {
	conv, err := c.conversation(id)
	if err != nil {
		return Conversation{}, err
	}
	kept, err := c.hist.Documents(id)
	if err != nil {
		return Conversation{}, err
	}
	conv.Documents = c.docs.restore(kept)
	conv.DocumentsNotKept = notKept(conv.Messages, kept)
	return conv, nil
}

// notKept names the documents the last answer cites that are not among
// kept, in citation order, each once.
func notKept(msgs []StoredMessage, kept []history.Document) []string {
	var last *StoredMessage
	for i := range msgs {
		if msgs[i].Role == "assistant" {
			last = &msgs[i]
		}
	}
	if last == nil {
		return nil
	}
	have := map[string]bool{}
	for _, k := range kept {
		have[k.Name] = true
	}
	var out []string
	for _, src := range last.Sources {
		if !have[src.Document] {
			have[src.Document] = true
			out = append(out, src.Document)
		}
	}
	return out
}

// deleteConversation deletes kept conversation id.
func (c *chatPart) deleteConversation(id int64) error {
	if c.hist == nil {
		return c.errNoHistory()
	}
	if err := c.hist.Delete(id); err != nil {
		return err
	}
	c.emit(EventHistory, HistoryChanged{ID: id})
	return nil
}

// exportConversation is kept conversation id as Markdown.
func (c *chatPart) exportConversation(id int64) (string, error) {
	if c.hist == nil {
		return "", c.errNoHistory()
	}
	return c.hist.ExportMarkdown(id)
}

// rename retitles kept conversation id (a quick action's); a failure
// keeps the title made from the message, since the reply is already
// streaming.
func (c *chatPart) rename(id int64, title string) {
	if id == 0 || c.hist == nil {
		return
	}
	if err := c.hist.Rename(id, title); err == nil {
		c.emit(EventHistory, HistoryChanged{ID: id})
	}
}
