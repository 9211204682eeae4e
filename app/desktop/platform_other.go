//go:build !darwin

package desktop

import "context"

// plainWindow is the development build of other systems: an ordinary
// window, shown at launch; closing it quits.
type plainWindow struct{}

func newPlatform() Platform { return plainWindow{} }

func (plainWindow) Window() WindowBehaviour { return WindowBehaviour{} }

func (plainWindow) Started(context.Context, WindowControl) error { return nil }

func (plainWindow) ModelChanged(string) {}

// HasStatusItem is false: there is no tray item to bring a hidden window
// back, so the window never hides by itself.
func (plainWindow) HasStatusItem() bool { return false }
