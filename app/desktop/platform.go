package desktop

import "context"

// Platform is what differs between the macOS menu-bar app and the window
// of other systems (the Linux development build): whether the window shows
// at launch, what closing it does, and what to set up once the app runs.
type Platform interface {
	// Window is the window's behaviour at launch and on close.
	Window() WindowBehaviour
	// Started runs once the app's run loop is up (Wails' OnStartup), with
	// the Wails context and the controls of the window. On macOS this is
	// where the status item is made and the activation policy becomes
	// Accessory (docs/ARCHITECTURE.md, "Data flow"; Wails v2 forces Regular at launch).
	Started(ctx context.Context, w WindowControl) error
	// ModelChanged tells the platform the loaded model's name ("" when
	// none), for the status item's menu.
	ModelChanged(name string)
	// HasStatusItem says whether a menu-bar (tray) item can show the
	// window again once it is hidden. Without one, hiding the window
	// (Escape) would leave the app running with no way back to it.
	HasStatusItem() bool
}

// WindowBehaviour is how the window behaves before the platform takes over.
type WindowBehaviour struct {
	StartHidden bool // stay hidden until the status item is clicked
	HideOnClose bool // closing hides the window; the app keeps running
	Frameless   bool // no title bar: the frontend draws its own header
}

// WindowControl is what a platform may do with the window.
type WindowControl interface {
	Show()
	Hide()
	SetPosition(x, y int)
}

// StatusItem is the menu-bar icon whose clicks show the window under it
// and hide it again.
type StatusItem interface {
	Close() error
}

// NewStatusItem makes the menu-bar icon for window w. The macOS
// implementation (darwinkit, on the main queue) sets it from its init; it
// is nil in builds without one, and the window is then shown at start so
// that the app stays reachable.
var NewStatusItem func(ctx context.Context, w WindowControl) (StatusItem, error)
