//go:build darwin && cgo

package desktop

// SMAppService (Start at Login) is in ServiceManagement, which nothing
// else links; its class is looked up at run time, so a Mac without it
// (before macOS 13) still starts.

// #cgo LDFLAGS: -framework ServiceManagement
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/progrium/darwinkit/dispatch"
	"github.com/progrium/darwinkit/helper/action"
	"github.com/progrium/darwinkit/macos/appkit"
	"github.com/progrium/darwinkit/macos/foundation"
	"github.com/progrium/darwinkit/objc"
	"github.com/wailsapp/wails/v2/pkg/runtime"

	"nibble/app/desktop/service"
	"nibble/app/settings"
)

func init() { NewStatusItem = newMenuBarItem }

// menuBarItem is Nibble's icon in the menu bar. A click shows the window
// under it, or hides it; a right click (or a Control- or Option-click)
// opens its menu. Wails owns the run loop: everything here runs on the
// main queue, from blocks queued by the methods.
type menuBarItem struct {
	ctx context.Context // Wails', for Quit
	win WindowControl

	// Main queue only.
	item      appkit.StatusItem
	menu      appkit.Menu
	modelItem appkit.MenuItem
	loginItem appkit.MenuItem
	quickMenu appkit.Menu            // the Quick Actions submenu
	actions   []settings.QuickAction // what quickMenu lists
	loginErr  string                 // why registering the login item failed, for its tooltip
	observers []objc.Object          // notification-center tokens, removed on Close
	model     string
	closed    bool
}

// newMenuBarItem queues the status item's creation on the main queue and
// returns at once: OnStartup runs on a goroutine of its own, and the main
// queue runs once Wails' run loop does, after NSApp has finished launching
// (and made itself Regular).
func newMenuBarItem(ctx context.Context, w WindowControl) (StatusItem, error) {
	s := &menuBarItem{ctx: ctx, win: w}
	onMain(s.setUp)
	return s, nil
}

// onMain runs f on the main thread, asynchronously.
func onMain(f func()) { dispatch.MainQueue().DispatchAsync(f) }

// onMainSync runs f on the main thread and waits for it.
func onMainSync(f func()) {
	// NSThread's class method: +currentThread would leave an autoreleased
	// object on a goroutine's thread, which has no pool.
	if objc.Call[bool](objc.GetClass("NSThread"), objc.Sel("isMainThread")) {
		f()
		return
	}
	dispatch.MainQueue().DispatchSync(f)
}

// Notification names (their values are the names of the AppKit constants).
const (
	appDidFinishLaunching = "NSApplicationDidFinishLaunchingNotification"
	appDidResignActive    = "NSApplicationDidResignActiveNotification"
)

func (s *menuBarItem) setUp() {
	app := appkit.Application_SharedApplication()
	// Wails v2 sets the Regular policy (a Dock icon) as the app launches,
	// whatever LSUIElement says; a menu-bar app is an Accessory. Should
	// this run before launching has finished, the observer sets it again.
	app.SetActivationPolicy(appkit.ApplicationActivationPolicyAccessory)
	s.observe(appDidFinishLaunching, func() {
		app.SetActivationPolicy(appkit.ApplicationActivationPolicyAccessory)
	})
	// A popover goes away when the user turns to another app. (Not on the
	// window resigning key: Nibble's own dialogs take the key window, and
	// the popover must stay behind them.)
	s.observe(appDidResignActive, func() { s.win.Hide() })

	item := appkit.StatusBar_SystemStatusBar().StatusItemWithLength(appkit.VariableStatusItemLength)
	if item.IsNil() {
		fmt.Fprintln(os.Stderr, "nibble: the menu bar has no room for Nibble's icon; showing the window instead")
		s.win.Show()
		return
	}
	item.Retain() // the status bar does not keep its items
	s.item = item
	button := item.Button()
	if img := appkit.Image_ImageWithSystemSymbolNameAccessibilityDescription("bubble.left", "Nibble"); !img.IsNil() {
		img.SetTemplate(true) // drawn in the menu bar's colours, light or dark
		button.SetImage(img)
	} else {
		button.SetTitle("Nibble") // no SF Symbols before macOS 11
	}
	button.SetToolTip("Nibble")
	action.Set(button, func(objc.Object) { s.clicked() })
	button.SendActionOn(appkit.EventMaskLeftMouseUp | appkit.EventMaskRightMouseUp)

	s.menu = s.buildMenu()
	s.menu.Retain()
	s.quickMenu.Retain()
}

func (s *menuBarItem) observe(name string, f func()) {
	token := foundation.NotificationCenter_DefaultCenter().AddObserverForNameObjectQueueUsingBlock(
		foundation.NotificationName(name), nil, foundation.OperationQueue_MainQueue(),
		func(foundation.Notification) { f() })
	token.Retain()
	s.observers = append(s.observers, token)
}

func (s *menuBarItem) buildMenu() appkit.Menu {
	menu := appkit.NewMenuWithTitle("Nibble")
	// Items are enabled by hand: the model's name is shown, not chosen.
	menu.SetAutoenablesItems(false)
	menu.AddItem(appkit.NewMenuItemWithAction("Open Nibble", "", func(objc.Object) { s.showUnderItem() }))
	s.modelItem = appkit.NewMenuItemWithSelector(modelMenuTitle(s.model), "", objc.Selector{})
	s.modelItem.SetEnabled(false)
	menu.AddItem(s.modelItem)
	quick := appkit.NewMenuItemWithSelector("Quick Actions", "", objc.Selector{})
	s.quickMenu = appkit.NewMenuWithTitle("Quick Actions")
	s.quickMenu.SetAutoenablesItems(false)
	s.fillQuickMenu()
	quick.SetSubmenu(s.quickMenu)
	menu.AddItem(quick)
	s.loginItem = appkit.NewMenuItemWithAction("Start at Login", "", func(objc.Object) { s.toggleLogin() })
	menu.AddItem(s.loginItem)
	menu.AddItem(appkit.MenuItem_SeparatorItem())
	// Through Wails, so that OnShutdown closes the engine.
	menu.AddItem(appkit.NewMenuItemWithAction("Quit Nibble", "q", func(objc.Object) { runtime.Quit(s.ctx) }))
	return menu
}

func modelMenuTitle(name string) string {
	if name == "" {
		return "No model loaded"
	}
	return "Model: " + name
}

// clicked is the button's action, on mouse-up of either button.
func (s *menuBarItem) clicked() {
	ev := appkit.Application_SharedApplication().CurrentEvent()
	rightClick := !ev.IsNil() && ev.Type() == appkit.EventTypeRightMouseUp
	if rightClick || appkit.Event_ModifierFlags()&(appkit.EventModifierFlagControl|appkit.EventModifierFlagOption) != 0 {
		s.showMenu()
		return
	}
	if w, ok := wailsWindow(); ok && w.IsVisible() && appkit.Application_SharedApplication().IsActive() {
		s.win.Hide()
		return
	}
	s.showUnderItem()
}

// showMenu opens the menu under the item. The menu is the item's only
// while it is open: with a menu set, a left click would open it too.
func (s *menuBarItem) showMenu() {
	s.refreshLogin()
	s.item.SetMenu(s.menu)
	s.item.Button().PerformClick(nil) // returns when the menu closes
	s.item.SetMenu(nil)
}

// showUnderItem moves the window under the status item and shows it.
// Wails' SetPosition and Show both queue their work on the main queue, in
// this order.
func (s *menuBarItem) showUnderItem() {
	if !s.item.IsNil() {
		if bw := s.item.Button().Window(); !bw.IsNil() {
			var itemScreen screenRect
			if sc := bw.Screen(); !sc.IsNil() {
				itemScreen = toScreenRect(sc.VisibleFrame())
			}
			width := float64(windowWidth)
			winScreen := appkit.Screen_MainScreen() // where Wails measures from when the window has no screen
			if w, ok := wailsWindow(); ok {
				width = w.Frame().Size.Width
				if sc := w.Screen(); !sc.IsNil() {
					winScreen = sc
				}
			}
			x, y := popoverPosition(toScreenRect(bw.Frame()), itemScreen, toScreenRect(winScreen.VisibleFrame()), width)
			s.win.SetPosition(x, y)
		}
	}
	s.win.Show() // Wails' Show also activates the app
}

func toScreenRect(r foundation.Rect) screenRect {
	return screenRect{X: r.Origin.X, Y: r.Origin.Y, W: r.Size.Width, H: r.Size.Height}
}

// wailsWindow is the window Wails made (its class is WailsWindow, in
// internal/frontend/desktop/darwin); NSApp's windows also hold the status
// item's.
func wailsWindow() (appkit.Window, bool) {
	cls := objc.GetClass("WailsWindow")
	if cls.Ptr() == nil {
		return appkit.Window{}, false
	}
	for _, w := range appkit.Application_SharedApplication().Windows() {
		if w.IsKindOfClass(cls) {
			return w, true
		}
	}
	return appkit.Window{}, false
}

// fillQuickMenu lists the quick actions in their submenu. Main queue only.
func (s *menuBarItem) fillQuickMenu() {
	s.quickMenu.RemoveAllItems()
	if len(s.actions) == 0 {
		none := appkit.NewMenuItemWithSelector("None: add some in Settings", "", objc.Selector{})
		none.SetEnabled(false)
		s.quickMenu.AddItem(none)
		return
	}
	header := appkit.NewMenuItemWithSelector("On the clipboard's text:", "", objc.Selector{})
	header.SetEnabled(false)
	s.quickMenu.AddItem(header)
	for _, q := range s.actions {
		name := q.Name
		s.quickMenu.AddItem(appkit.NewMenuItemWithAction(name, "", func(objc.Object) { s.runQuickAction(name) }))
	}
}

// SetQuickActions lists actions in the Quick Actions submenu.
func (s *menuBarItem) SetQuickActions(actions []settings.QuickAction) {
	onMain(func() {
		s.actions = actions
		if !s.closed && !s.quickMenu.IsNil() {
			s.fillQuickMenu()
		}
	})
}

// runQuickAction reads the clipboard's text, shows the popover and has
// the window run the action on it, so the answer streams in the chat as
// any reply does. On the main queue (a menu item's action).
func (s *menuBarItem) runQuickAction(name string) {
	text := appkit.Pasteboard_GeneralPasteboard().StringForType(appkit.PasteboardTypeString)
	s.showUnderItem()
	runtime.EventsEmit(s.ctx, service.EventQuickAction, service.QuickActionRequest{Name: name, Text: text})
}

// OpenPrompt shows the popover with its prompt box focused (the global
// hotkey).
func (s *menuBarItem) OpenPrompt() {
	onMain(func() {
		if s.closed {
			return
		}
		s.showUnderItem()
		runtime.EventsEmit(s.ctx, service.EventOpenPrompt)
	})
}

// SetModel shows the loaded model's name ("" when none) in the menu.
func (s *menuBarItem) SetModel(name string) {
	onMain(func() {
		s.model = name
		if !s.closed && !s.modelItem.IsNil() {
			s.modelItem.SetTitle(modelMenuTitle(name))
		}
	})
}

// Close takes the icon out of the menu bar.
func (s *menuBarItem) Close() error {
	onMain(func() {
		if s.closed {
			return
		}
		s.closed = true
		center := foundation.NotificationCenter_DefaultCenter()
		for _, o := range s.observers {
			center.RemoveObserver(o)
			o.Release()
		}
		s.observers = nil
		if !s.item.IsNil() {
			appkit.StatusBar_SystemStatusBar().RemoveStatusItem(s.item)
			s.item.Release()
			s.menu.Release()
			s.quickMenu.Release()
		}
	})
	return nil
}

// ---- Start at Login: SMAppService.mainAppService (macOS 13+), which
// registers the app bundle itself as a login item.

// SMAppServiceStatus values (0 is not registered).
const (
	loginEnabled          = 1
	loginRequiresApproval = 2
	loginNotFound         = 3
)

// mainAppService is SMAppService.mainAppService, or why there is none.
func mainAppService() (objc.Object, error) {
	cls := objc.GetClass("SMAppService")
	if cls.Ptr() == nil {
		return objc.Object{}, errors.New("Start at Login needs macOS 13 or later")
	}
	if foundation.Bundle_MainBundle().BundleIdentifier() == "" {
		return objc.Object{}, errors.New("only Nibble.app can start at login, not a bare binary")
	}
	svc := objc.Call[objc.Object](cls, objc.Sel("mainAppService"))
	if svc.IsNil() {
		return objc.Object{}, errors.New("macOS has no login-item service for this app")
	}
	return svc, nil
}

// refreshLogin sets the Start at Login item from the service's status,
// which System Settings may have changed since the menu last opened.
func (s *menuBarItem) refreshLogin() {
	svc, err := mainAppService()
	switch {
	case err != nil:
		s.setLoginItem(appkit.ControlStateValueOff, false, err.Error())
	case s.loginErr != "":
		// Registering failed before (typically an unsigned build): it would
		// fail again.
		s.setLoginItem(appkit.ControlStateValueOff, false, s.loginErr)
	default:
		switch objc.Call[int](svc, objc.Sel("status")) {
		case loginEnabled:
			s.setLoginItem(appkit.ControlStateValueOn, true, "")
		case loginRequiresApproval:
			s.setLoginItem(appkit.ControlStateValueMixed, true,
				"Waiting for your approval in System Settings › General › Login Items")
		case loginNotFound:
			s.setLoginItem(appkit.ControlStateValueOff, false, "macOS cannot find Nibble.app's login item")
		default:
			s.setLoginItem(appkit.ControlStateValueOff, true, "")
		}
	}
}

func (s *menuBarItem) setLoginItem(state appkit.ControlStateValue, enabled bool, tip string) {
	s.loginItem.SetState(state)
	s.loginItem.SetEnabled(enabled)
	s.loginItem.SetToolTip(tip)
}

// toggleLogin registers Nibble as a login item, or unregisters it.
func (s *menuBarItem) toggleLogin() {
	svc, err := mainAppService()
	if err != nil {
		return // the item was disabled
	}
	status := objc.Call[int](svc, objc.Sel("status"))
	sel := "registerAndReturnError:"
	if status == loginEnabled || status == loginRequiresApproval {
		sel = "unregisterAndReturnError:"
	}
	var nserr foundation.Error
	if !objc.Call[bool](svc, objc.Sel(sel), unsafe.Pointer(&nserr)) {
		msg := "unknown error"
		if !nserr.IsNil() {
			msg = nserr.LocalizedDescription()
		}
		s.loginErr = "Start at Login is unavailable: " + msg
		fmt.Fprintf(os.Stderr, "nibble: %s: %s\n", sel, msg)
		return
	}
	if objc.Call[int](svc, objc.Sel("status")) == loginRequiresApproval {
		// The user must allow it; take them where they can.
		objc.Call[objc.Void](objc.GetClass("SMAppService"), objc.Sel("openSystemSettingsLoginItems"))
	}
}
