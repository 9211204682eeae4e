package service

import (
	"sync"

	"nibble/app/settings"
)

// HotkeyStatus is the global hotkey as the platform registered it.
type HotkeyStatus struct {
	// Supported: this system registers global hotkeys (macOS).
	Supported bool   `json:"supported"`
	Hotkey    string `json:"hotkey"`          // the one registered ("" = none)
	Error     string `json:"error,omitempty"` // why the setting's hotkey is not registered
}

// hotkey is what the platform last reported of the global hotkey
// (SetHotkeyStatus).
type hotkey struct {
	store *settings.Store

	mu sync.Mutex // guards st
	st HotkeyStatus
}

// set records what the platform did with the hotkey setting.
func (h *hotkey) set(st HotkeyStatus) {
	h.mu.Lock()
	h.st = st
	h.mu.Unlock()
}

// status says whether the setting's global hotkey is registered.
// Only macOS registers one: elsewhere the setting is kept, and this says
// so.
func (h *hotkey) status() HotkeyStatus {
	h.mu.Lock()
	st := h.st
	h.mu.Unlock()
	if !st.Supported {
		st.Hotkey = ""
		if h.store.Get().Hotkey != "" {
			st.Error = "global hotkeys work on macOS only: the setting is kept for when Nibble runs there"
		}
	}
	return st
}
