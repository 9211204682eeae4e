package service

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"nibble/app/settings"
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

// QuickActions are the quick actions of the settings, in their order.
func (s *Service) QuickActions() []settings.QuickAction {
	qa := s.store.Get().QuickActions
	if qa == nil {
		return []settings.QuickAction{}
	}
	return qa
}

// quickAction finds the action called name (case and surrounding spaces
// do not matter, as in the settings' check for duplicates).
func (s *Service) quickAction(name string) (settings.QuickAction, error) {
	actions := s.QuickActions()
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

// RunQuickAction fills the template of the action called name with text
// (the clipboard's) and sends it as the first message of a new
// conversation, titled with the action's name. Text that is empty, or
// too long to leave the answer QuickReplyRoom tokens of the context, is
// refused with an error that says so; it is never cut.
func (s *Service) RunQuickAction(name, text string) (QuickActionResult, error) {
	q, err := s.quickAction(name)
	if err != nil {
		return QuickActionResult{}, err
	}
	if strings.TrimSpace(text) == "" {
		return QuickActionResult{}, ErrEmptyClipboard
	}
	req := SendRequest{Messages: []Message{{Role: "user", Content: q.Render(text)}}}
	if err := s.checkQuickFits(q, req); err != nil {
		return QuickActionResult{}, err
	}
	res, err := s.Send(req)
	if err != nil {
		return QuickActionResult{}, fmt.Errorf("quick action %q: %w", q.Name, err)
	}
	if res.ConversationID != 0 && s.hist != nil {
		if err := s.hist.Rename(res.ConversationID, q.Name); err == nil {
			s.emit(EventHistory, HistoryChanged{ID: res.ConversationID})
		}
		// A failed rename keeps the title made from the message: no reason
		// to fail the reply that is already streaming.
	}
	return QuickActionResult{ReplyID: res.ReplyID, ConversationID: res.ConversationID, Name: q.Name, Prompt: req.Messages[0].Content}, nil
}

// checkQuickFits counts req's prompt with the loaded model's tokenizer and
// chat template (the system prompt included) and refuses it when it
// leaves the answer less than QuickReplyRoom tokens (or the demo's cap).
func (s *Service) checkQuickFits(q settings.QuickAction, req SendRequest) error {
	r, err := s.request(req)
	if err != nil {
		return err
	}
	n, budget, err := s.promptTokens(r) // approximate for a remote model
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

// HotkeyStatus is the global hotkey as the platform registered it.
type HotkeyStatus struct {
	// Supported: this system registers global hotkeys (macOS).
	Supported bool   `json:"supported"`
	Hotkey    string `json:"hotkey"`          // the one registered ("" = none)
	Error     string `json:"error,omitempty"` // why the setting's hotkey is not registered
}

// hotkeyState is what the platform last reported (SetHotkeyStatus).
type hotkeyState struct {
	mu sync.Mutex
	st HotkeyStatus
}

// SetHotkeyStatus records what the platform did with the hotkey setting.
func (s *Service) SetHotkeyStatus(st HotkeyStatus) {
	s.hotkey.mu.Lock()
	s.hotkey.st = st
	s.hotkey.mu.Unlock()
}

// HotkeyStatus says whether the setting's global hotkey is registered.
// Only macOS registers one: elsewhere the setting is kept, and this says
// so.
func (s *Service) HotkeyStatus() HotkeyStatus {
	s.hotkey.mu.Lock()
	st := s.hotkey.st
	s.hotkey.mu.Unlock()
	if !st.Supported {
		st.Hotkey = ""
		if s.store.Get().Hotkey != "" {
			st.Error = "global hotkeys work on macOS only: the setting is kept for when Nibble runs there"
		}
	}
	return st
}
