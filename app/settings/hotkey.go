package settings

import (
	"errors"
	"fmt"
	"strings"
)

// Hotkey is a parsed global hotkey: modifiers and one key, with the key's
// macOS virtual key code (Carbon's kVK_* constants, which RegisterEventHotKey
// takes). Parsing is platform-neutral so that Settings can refuse a bad
// hotkey on any system; only macOS registers it.
type Hotkey struct {
	Cmd, Ctrl, Option, Shift bool
	Key                      string // canonical name, e.g. "space", "k", "f5"
	KeyCode                  uint16 // macOS virtual key code
}

// String is the canonical spelling, modifiers in a fixed order:
// "cmd+shift+space".
func (h Hotkey) String() string {
	var parts []string
	for _, m := range []struct {
		on   bool
		name string
	}{{h.Cmd, "cmd"}, {h.Ctrl, "ctrl"}, {h.Option, "option"}, {h.Shift, "shift"}} {
		if m.on {
			parts = append(parts, m.name)
		}
	}
	return strings.Join(append(parts, h.Key), "+")
}

// modifierNames maps every accepted spelling to the canonical modifier.
var modifierNames = map[string]string{
	"cmd": "cmd", "command": "cmd", "⌘": "cmd",
	"ctrl": "ctrl", "control": "ctrl", "⌃": "ctrl",
	"option": "option", "opt": "option", "alt": "option", "⌥": "option",
	"shift": "shift", "⇧": "shift",
}

// keyCodes are the keys a hotkey may end with and their macOS virtual key
// codes (HIToolbox/Events.h; those of letters and digits follow the ANSI
// layout's positions, not alphabetical order).
var keyCodes = map[string]uint16{
	"a": 0x00, "s": 0x01, "d": 0x02, "f": 0x03, "h": 0x04, "g": 0x05, "z": 0x06, "x": 0x07,
	"c": 0x08, "v": 0x09, "b": 0x0B, "q": 0x0C, "w": 0x0D, "e": 0x0E, "r": 0x0F, "y": 0x10,
	"t": 0x11, "1": 0x12, "2": 0x13, "3": 0x14, "4": 0x15, "6": 0x16, "5": 0x17, "=": 0x18,
	"9": 0x19, "7": 0x1A, "-": 0x1B, "8": 0x1C, "0": 0x1D, "]": 0x1E, "o": 0x1F, "u": 0x20,
	"[": 0x21, "i": 0x22, "p": 0x23, "l": 0x25, "j": 0x26, "'": 0x27, "k": 0x28, ";": 0x29,
	"\\": 0x2A, ",": 0x2B, "/": 0x2C, "n": 0x2D, "m": 0x2E, ".": 0x2F, "`": 0x32,
	"return": 0x24, "tab": 0x30, "space": 0x31, "delete": 0x33, "escape": 0x35,
	"f1": 0x7A, "f2": 0x78, "f3": 0x63, "f4": 0x76, "f5": 0x60, "f6": 0x61, "f7": 0x62,
	"f8": 0x64, "f9": 0x65, "f10": 0x6D, "f11": 0x67, "f12": 0x6F,
	"left": 0x7B, "right": 0x7C, "down": 0x7D, "up": 0x7E,
}

// keyAliases are other spellings of keys in keyCodes.
var keyAliases = map[string]string{
	"enter": "return", "esc": "escape", "backspace": "delete", "spacebar": "space",
}

// ParseHotkey reads a hotkey such as "cmd+shift+space" or "Ctrl+Option+K":
// one or more modifiers (cmd, ctrl, option, shift, or command, control,
// alt, opt), then one key (a letter, a digit, space, return, tab, escape,
// delete, an arrow, f1 to f12, or punctuation). Case does not matter. A
// hotkey needs cmd, ctrl or option: shift alone would take a character
// away from typing in every app.
func ParseHotkey(s string) (Hotkey, error) {
	var h Hotkey
	if strings.TrimSpace(s) == "" {
		return h, errors.New("empty: name modifiers and a key, e.g. cmd+shift+space")
	}
	if len(s) > 64 {
		return h, errors.New("longer than 64 bytes")
	}
	parts := strings.Split(strings.ToLower(s), "+")
	if strings.HasSuffix(s, "++") || s == "+" {
		// "cmd++" means the key "+", which needs shift on most layouts:
		// name "=" with shift instead.
		return h, errors.New(`"+" cannot be the key: use "shift+=" for it`)
	}
	seen := map[string]bool{}
	for i, p := range parts {
		if p == "" {
			return h, errors.New(`an empty key between "+" signs`)
		}
		if strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return h, fmt.Errorf("key %q contains a space or control character", p)
		}
		last := i == len(parts)-1
		if m, ok := modifierNames[p]; ok {
			if last {
				return h, fmt.Errorf("ends with the modifier %q: add a key, e.g. %s+space", p, s)
			}
			if seen[m] {
				return h, fmt.Errorf("the modifier %q is named twice", m)
			}
			seen[m] = true
			continue
		}
		if !last {
			return h, fmt.Errorf("%q is not a modifier (cmd, ctrl, option, shift), and only the last part may be a key", p)
		}
		if a, ok := keyAliases[p]; ok {
			p = a
		}
		code, ok := keyCodes[p]
		if !ok {
			return h, fmt.Errorf("unknown key %q: want a letter, a digit, space, return, tab, escape, delete, left, right, up, down, f1 to f12 or punctuation", p)
		}
		h.Key, h.KeyCode = p, code
	}
	h.Cmd, h.Ctrl, h.Option, h.Shift = seen["cmd"], seen["ctrl"], seen["option"], seen["shift"]
	if !h.Cmd && !h.Ctrl && !h.Option {
		return h, errors.New("needs cmd, ctrl or option: without one the hotkey would take a key from typing in every app")
	}
	return h, nil
}
