package desktop

import (
	"context"
	"fmt"
)

// menuBar is the macOS app: a window that lives under the status item,
// hidden at launch and on close.
type menuBar struct {
	item StatusItem
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
	p.item = item
	return nil
}

func (p *menuBar) ModelChanged(name string) {
	if m, ok := p.item.(interface{ SetModel(string) }); ok {
		m.SetModel(name)
	}
}
