package desktop

import (
	"context"
	"fmt"
	"sync"
)

// menuBar is the macOS app: a window that lives under the status item
// (statusitem_darwin.go), hidden at launch and on close.
type menuBar struct {
	mu    sync.Mutex // Started runs on OnStartup's goroutine, ModelChanged on the engine's
	item  StatusItem
	model string // the last name ModelChanged gave, for an item made after it
}

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
	p.item = item
	model := p.model
	p.mu.Unlock()
	if model != "" {
		setModel(item, model)
	}
	return nil
}

func (p *menuBar) ModelChanged(name string) {
	p.mu.Lock()
	p.model = name
	item := p.item
	p.mu.Unlock()
	setModel(item, name)
}

// setModel shows name in item's menu, when the item has a model line.
func setModel(item StatusItem, name string) {
	if m, ok := item.(interface{ SetModel(string) }); ok {
		m.SetModel(name)
	}
}
