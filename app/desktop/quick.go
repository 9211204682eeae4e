package desktop

import (
	"nibble/app/desktop/service"
	"nibble/app/settings"
)

// settingsFollower is a Platform that follows the settings: on macOS the
// status item's Quick Actions menu and the global hotkey. It returns what
// became of the hotkey.
type settingsFollower interface {
	SettingsChanged(c settings.Settings) HotkeyResult
}

// HotkeyResult is what a platform did with the hotkey setting.
type HotkeyResult struct {
	Registered string // the hotkey now registered, canonical ("" = none)
	Err        error  // why the setting's hotkey is not registered
}

// settingsChanged hands the settings in force to the platform and records
// the hotkey's fate for the window. The settings are read under the lock,
// so that of two changes racing here the last to apply is the newest.
func (d *Desktop) settingsChanged() {
	p, ok := d.Platform.(settingsFollower)
	if !ok {
		return // the service says hotkeys are macOS-only
	}
	d.settingsMu.Lock()
	defer d.settingsMu.Unlock()
	r := p.SettingsChanged(d.svc.Settings())
	st := service.HotkeyStatus{Supported: true, Hotkey: r.Registered}
	if r.Err != nil {
		st.Error = r.Err.Error()
	}
	d.svc.SetHotkeyStatus(st)
}
