package desktop

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"nibble/app/desktop/service"
	"nibble/app/settings"
)

// hotkeyPlatform is a platform that follows the settings, as macOS does,
// and refuses one hotkey (as when another app holds it).
type hotkeyPlatform struct {
	fakePlatform
	mu   sync.Mutex
	seen []settings.Settings
}

func (p *hotkeyPlatform) SettingsChanged(c settings.Settings) HotkeyResult {
	p.mu.Lock()
	p.seen = append(p.seen, c)
	p.mu.Unlock()
	if c.Hotkey == "cmd+space" {
		return HotkeyResult{Err: errors.New("taken by Spotlight")}
	}
	return HotkeyResult{Registered: c.Hotkey}
}

func TestSettingsReachThePlatform(t *testing.T) {
	t.Setenv(settings.HomeEnv, t.TempDir())
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown()
	plat := &hotkeyPlatform{}
	d.Platform = plat
	d.settingsChanged() // as Startup does
	if st := d.App.HotkeyStatus(); !st.Supported || st.Hotkey != "" || st.Error != "" {
		t.Fatalf("at start, no hotkey set: %+v", st)
	}

	c := d.App.Settings()
	c.Hotkey = "cmd+shift+space"
	c.QuickActions = c.QuickActions[:2]
	if _, err := d.App.UpdateSettings(c); err != nil {
		t.Fatal(err)
	}
	plat.mu.Lock()
	last := plat.seen[len(plat.seen)-1]
	plat.mu.Unlock()
	if last.Hotkey != "cmd+shift+space" || len(last.QuickActions) != 2 {
		t.Fatalf("the platform got %+v", last)
	}
	if st := d.App.HotkeyStatus(); st.Hotkey != "cmd+shift+space" || st.Error != "" {
		t.Fatalf("registered: %+v", st)
	}

	c.Hotkey = "cmd+space"
	if _, err := d.App.UpdateSettings(c); err != nil {
		t.Fatal(err)
	}
	if st := d.App.HotkeyStatus(); st.Hotkey != "" || !strings.Contains(st.Error, "Spotlight") {
		t.Fatalf("refused by the system: %+v", st)
	}

	// A platform that does not follow the settings (Linux) registers
	// nothing, and the status says so.
	d.Platform = &fakePlatform{}
	d.svc.SetHotkeyStatus(service.HotkeyStatus{})
	d.settingsChanged()
	if st := d.App.HotkeyStatus(); st.Supported || !strings.Contains(st.Error, "macOS only") {
		t.Fatalf("on a platform without hotkeys: %+v", st)
	}
}

// The window's "Reset to defaults" and its checks have their own copy of
// the settings' default quick actions and limits
// (frontend/src/lib/stores/quickActions.svelte.ts): the two must agree.
func TestFrontendQuickActionDefaultsMatchSettings(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "frontend", "src", "lib", "stores", "quickActions.svelte.ts"))
	if err != nil {
		t.Skipf("the frontend's source is not here: %v", err)
	}
	ts := string(src)
	for _, q := range settings.Defaults().QuickActions {
		// As the TypeScript writes it: a template literal, \n escaped,
		// the placeholder through its constant.
		prompt := strings.ReplaceAll(strings.ReplaceAll(q.Prompt, "\n", `\n`), settings.Placeholder, "${placeholder}")
		if !strings.Contains(ts, "name: '"+q.Name+"'") || !strings.Contains(ts, "prompt: `"+prompt+"`") {
			t.Errorf("quickActions.svelte.ts's defaultActions lacks %q with the prompt %q", q.Name, prompt)
		}
	}
	for _, want := range []string{
		"placeholder = '" + settings.Placeholder + "'",
		"maxActions = " + strconv.Itoa(settings.MaxQuickActions),
		"maxNameLength = " + strconv.Itoa(settings.MaxQuickActionName),
	} {
		if !strings.Contains(ts, want) {
			t.Errorf("quickActions.svelte.ts lacks %q", want)
		}
	}
}
