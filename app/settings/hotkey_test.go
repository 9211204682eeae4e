package settings

import (
	"strings"
	"testing"
)

func TestParseHotkey(t *testing.T) {
	for _, c := range []struct {
		in, canonical string
		code          uint16
	}{
		{"cmd+shift+space", "cmd+shift+space", 0x31},
		{"Shift+Command+Space", "cmd+shift+space", 0x31},
		{"ctrl+option+k", "ctrl+option+k", 0x28},
		{"alt+F5", "option+f5", 0x60},
		{"opt+enter", "option+return", 0x24},
		{"cmd+ctrl+option+shift+a", "cmd+ctrl+option+shift+a", 0x00},
		{"⌘+⇧+/", "cmd+shift+/", 0x2C},
	} {
		h, err := ParseHotkey(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if h.String() != c.canonical || h.KeyCode != c.code {
			t.Errorf("%q = %s (key code %#x), want %s (%#x)", c.in, h, h.KeyCode, c.canonical, c.code)
		}
	}
}

func TestParseHotkeyRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "empty",
		"space":                          "needs cmd, ctrl or option",
		"shift+a":                        "needs cmd, ctrl or option",
		"cmd+shift":                      "ends with the modifier",
		"cmd+cmd+k":                      "named twice",
		"cmd++space":                     "empty key",
		"cmd+shift space":                "space or control",
		"cmd+k+space":                    "only the last part may be a key",
		"cmd+pageup":                     "unknown key",
		"cmd++":                          `"+" cannot be the key`,
		strings.Repeat("cmd+", 20) + "k": "longer than 64",
	} {
		_, err := ParseHotkey(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one that says %q", in, err, want)
		}
	}
}

// Every key code is a distinct key: a typo in the table would make two
// names register the same key.
func TestHotkeyKeyCodesDistinct(t *testing.T) {
	byCode := map[uint16]string{}
	for name, code := range keyCodes {
		if other, dup := byCode[code]; dup {
			t.Errorf("%q and %q share key code %#x", name, other, code)
		}
		byCode[code] = name
	}
	for alias, key := range keyAliases {
		if _, ok := keyCodes[key]; !ok {
			t.Errorf("alias %q names %q, which is not a key", alias, key)
		}
	}
}

func TestValidateQuickActionsAndToken(t *testing.T) {
	s := Defaults()
	s.Server.Token = "secret token"
	s.QuickActions[0].Name = strings.Repeat("x", MaxQuickActionName+1)
	s.QuickActions[1].Name = "two\nlines"
	err := s.Validate()
	for _, want := range []string{"server.token: contains a space", "quickActions[0].name: 41 characters", "quickActions[1].name: must be one line"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want a line %q", err, want)
		}
	}
	s = Defaults()
	for len(s.QuickActions) <= MaxQuickActions {
		s.QuickActions = append(s.QuickActions, QuickAction{Name: "a" + strings.Repeat("b", len(s.QuickActions)), Prompt: Placeholder})
	}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "quickActions: 21 actions") {
		t.Errorf("21 actions: %v", err)
	}
	s = Defaults()
	s.Server.Token = "s3cret"
	s.Hotkey = "ctrl+option+space"
	if err := s.Validate(); err != nil {
		t.Errorf("a token and a hotkey: %v", err)
	}
}
