package service

import (
	"errors"
	"fmt"
	"strings"

	"nibble/app/settings"
	"nibble/engine/scheduler"
)

// EventQuickAction asks the window to run a quick action on the
// clipboard's text (the status item's Quick Actions menu, on macOS), and
// EventOpenPrompt to show the prompt box (the global hotkey).
const (
	EventQuickAction = "quickaction:run" // QuickActionRequest
	EventOpenPrompt  = "prompt:open"     // nothing
	EventSettings    = "settings:changed"
)

// ErrEmptyClipboard is RunQuickAction's error when there is no text to
// run the action on.
var ErrEmptyClipboard = errors.New("the clipboard has no text: copy some text first, then choose the action again")

// QuickReplyRoom is how many tokens of the context a quick action keeps
// for its answer: a prompt that leaves less is refused rather than
// answered with a few words.
const QuickReplyRoom = 256

// QuickActionRequest names an action and the text to run it on.
type QuickActionRequest struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// QuickActionResult is a quick action's reply, started: it streams like
// Send's, in a new conversation titled with the action's name.
type QuickActionResult struct {
	ReplyID        string `json:"replyId"`
	ConversationID int64  `json:"conversationId"`
	Name           string `json:"name"`
	// Prompt is the template filled with the text: the user's turn as the
	// model sees it and the history keeps it.
	Prompt string `json:"prompt"`
}

// quickActions runs the settings' quick actions on the clipboard's text,
// as new chats.
type quickActions struct {
	store *settings.Store
	chat  quickChat
}

// quickChat is the chat part as the quick actions see it.
type quickChat interface {
	send(req SendRequest) (SendResult, error)
	request(req SendRequest) (scheduler.Request, error)
	promptTokens(r scheduler.Request) (n, budget int, err error)
	rename(id int64, title string)
}

// list is the quick actions of the settings, in their order.
func (qa *quickActions) list() []settings.QuickAction {
	actions := qa.store.Get().QuickActions
	if actions == nil {
		return []settings.QuickAction{}
	}
	return actions
}

// find finds the action called name (case and surrounding spaces
// do not matter, as in the settings' check for duplicates).
func (qa *quickActions) find(name string) (settings.QuickAction, error) {
	actions := qa.list()
	want := strings.ToLower(strings.TrimSpace(name))
	names := make([]string, 0, len(actions))
	for _, q := range actions {
		if strings.ToLower(strings.TrimSpace(q.Name)) == want {
			return q, nil
		}
		names = append(names, fmt.Sprintf("%q", q.Name))
	}
	if len(names) == 0 {
		return settings.QuickAction{}, fmt.Errorf("no quick action named %q: there are none (add some in Settings)", name)
	}
	return settings.QuickAction{}, fmt.Errorf("no quick action named %q; the actions are %s", name, strings.Join(names, ", "))
}

// run fills the template of the action called name with text
// (the clipboard's) and sends it as the first message of a new
// conversation, titled with the action's name. Text that is empty, or
// too long to leave the answer QuickReplyRoom tokens of the context, is
// refused with an error that says so; it is never cut.
func (qa *quickActions) run(name, text string) (QuickActionResult, error) {
	q, err := qa.find(name)
	if err != nil {
		return QuickActionResult{}, err
	}
	if strings.TrimSpace(text) == "" {
		return QuickActionResult{}, ErrEmptyClipboard
	}
	req := SendRequest{Messages: []Message{{Role: "user", Content: q.Render(text)}}}
	if err := qa.checkFits(q, req); err != nil {
		return QuickActionResult{}, err
	}
	res, err := qa.chat.send(req)
	if err != nil {
		return QuickActionResult{}, fmt.Errorf("quick action %q: %w", q.Name, err)
	}
	qa.chat.rename(res.ConversationID, q.Name)
	return QuickActionResult{ReplyID: res.ReplyID, ConversationID: res.ConversationID, Name: q.Name, Prompt: req.Messages[0].Content}, nil
}

// checkFits counts req's prompt with the loaded model's tokenizer and
// chat template (the system prompt included) and refuses it when it
// leaves the answer less than QuickReplyRoom tokens (or the demo's cap).
func (qa *quickActions) checkFits(q settings.QuickAction, req SendRequest) error {
	r, err := qa.chat.request(req)
	if err != nil {
		return err
	}
	n, budget, err := qa.chat.promptTokens(r) // approximate for a remote model
	if err != nil {
		return fmt.Errorf("quick action %q: count the prompt's tokens: %w", q.Name, err)
	}
	room := QuickReplyRoom
	if r.Params.MaxTokens > 0 {
		room = min(room, r.Params.MaxTokens)
	}
	if n+room > budget {
		return fmt.Errorf("the clipboard's text is too long for %q: with the action's prompt it comes to %d tokens, and the answer needs room for %d more, but the context budget is %d tokens. Copy less text, or raise the context budget in Models",
			q.Name, n, room, budget)
	}
	return nil
}
