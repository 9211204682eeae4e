//go:build darwin && cgo

package desktop

import (
	"golang.design/x/hotkey"

	"nibble/app/settings"
)

func init() { registerHotkey = registerCarbonHotkey }

// registerCarbonHotkey registers h with Carbon's RegisterEventHotKey
// (through golang.design/x/hotkey, which does it on the main queue: so it
// must not be called from the main thread, and is not: SettingsChanged
// runs on the bound methods' and OnStartup's goroutines). fire runs on a
// goroutine of its own for each press.
func registerCarbonHotkey(h settings.Hotkey, fire func()) (func(), error) {
	var mods []hotkey.Modifier
	if h.Cmd {
		mods = append(mods, hotkey.ModCmd)
	}
	if h.Ctrl {
		mods = append(mods, hotkey.ModCtrl)
	}
	if h.Option {
		mods = append(mods, hotkey.ModOption)
	}
	if h.Shift {
		mods = append(mods, hotkey.ModShift)
	}
	hk := hotkey.New(mods, hotkey.Key(h.KeyCode))
	if err := hk.Register(); err != nil {
		// Typically another app holds the same combination.
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		keydown := hk.Keydown()
		for {
			select {
			case _, ok := <-keydown:
				if !ok {
					return
				}
				fire()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		hk.Unregister() // fails only for a hotkey that is not registered
	}, nil
}
