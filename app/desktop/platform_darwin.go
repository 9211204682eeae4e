package desktop

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"nibble/app/settings"
)

// menuBar is the macOS app: a window that lives under the status item
// (statusitem_darwin.go), hidden at launch and on close.
type menuBar struct {
	mu      sync.Mutex // Started runs on OnStartup's goroutine, ModelChanged on the engine's
	item    StatusItem
	win     WindowControl
	model   string                 // the last name ModelChanged gave, for an item made after it
	actions []settings.QuickAction // the last SettingsChanged gave, likewise

	// The registered global hotkey (SettingsChanged; Desktop serializes
	// its calls).
	hotkey     string // canonical, "" = none
	unregister func()
}

// registerHotkey registers a global hotkey that calls fire on each press,
// and returns how to unregister it. hotkey_darwin.go sets it; a build
// without cgo has none.
var registerHotkey func(h settings.Hotkey, fire func()) (unregister func(), err error)

func newPlatform() Platform { return &menuBar{} }

func (p *menuBar) Window() WindowBehaviour {
	return WindowBehaviour{StartHidden: true, HideOnClose: true, Frameless: true}
}

func (p *menuBar) Started(ctx context.Context, w WindowControl) error {
	if NewStatusItem == nil {
		// No menu-bar icon in this build: a hidden window could never be
		// reached, so show it.
		w.Show()
		return nil
	}
	item, err := NewStatusItem(ctx, w)
	if err != nil {
		w.Show()
		return fmt.Errorf("menu-bar icon: %w", err)
	}
	p.mu.Lock()
	p.item, p.win = item, w
	model, actions := p.model, p.actions
	p.mu.Unlock()
	if model != "" {
		setModel(item, model)
	}
	setQuickActions(item, actions)
	return nil
}

// SettingsChanged puts the quick actions in the status item's menu and
// registers the settings' global hotkey in place of the previous one.
func (p *menuBar) SettingsChanged(c settings.Settings) HotkeyResult {
	p.mu.Lock()
	p.actions = c.QuickActions
	item := p.item
	p.mu.Unlock()
	setQuickActions(item, c.QuickActions)

	want := ""
	var h settings.Hotkey
	if c.Hotkey != "" {
		var err error
		if h, err = settings.ParseHotkey(c.Hotkey); err != nil {
			return HotkeyResult{Registered: p.hotkey, Err: fmt.Errorf("hotkey %q: %w", c.Hotkey, err)}
		}
		want = h.String()
	}
	if want == p.hotkey {
		return HotkeyResult{Registered: p.hotkey}
	}
	if p.unregister != nil {
		p.unregister()
		p.unregister, p.hotkey = nil, ""
	}
	if want == "" {
		return HotkeyResult{}
	}
	if registerHotkey == nil {
		return HotkeyResult{Err: errors.New("this build of Nibble has no global hotkeys (it was built without cgo)")}
	}
	unregister, err := registerHotkey(h, p.openPrompt)
	if err != nil {
		return HotkeyResult{Err: fmt.Errorf("hotkey %s: %w", want, err)}
	}
	p.unregister, p.hotkey = unregister, want
	return HotkeyResult{Registered: want}
}

// openPrompt is the hotkey's action: the popover with its prompt box.
func (p *menuBar) openPrompt() {
	p.mu.Lock()
	item, w := p.item, p.win
	p.mu.Unlock()
	if o, ok := item.(interface{ OpenPrompt() }); ok {
		o.OpenPrompt()
	} else if w != nil {
		w.Show()
	}
}

func (p *menuBar) ModelChanged(name string) {
	p.mu.Lock()
	p.model = name
	item := p.item
	p.mu.Unlock()
	setModel(item, name)
}

// HasStatusItem says whether the status item was made: without it (a
// build without cgo, or AppKit refused) the window stays shown.
func (p *menuBar) HasStatusItem() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.item != nil
}

// setModel shows name in item's menu, when the item has a model line.
func setModel(item StatusItem, name string) {
	if m, ok := item.(interface{ SetModel(string) }); ok {
		m.SetModel(name)
	}
}

// setQuickActions lists actions in item's menu, when it has a Quick
// Actions menu.
func setQuickActions(item StatusItem, actions []settings.QuickAction) {
	if m, ok := item.(interface {
		SetQuickActions([]settings.QuickAction)
	}); ok {
		m.SetQuickActions(actions)
	}
}
