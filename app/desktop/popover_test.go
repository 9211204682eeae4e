package desktop

import "testing"

// wailsTopLeft is what Wails' darwin SetPosition does with (x, y): the
// window's top-left corner in global screen coordinates.
func wailsTopLeft(x, y int, winScreen screenRect) (left, top float64) {
	return winScreen.X + float64(x), winScreen.Y + winScreen.H - float64(y)
}

func TestPopoverPosition(t *testing.T) {
	// A 1440×900 primary screen with a 24-point menu bar and no Dock
	// below, and a 1920×1080 screen to its left with a 25-point menu bar.
	primary := screenRect{0, 0, 1440, 876}
	left := screenRect{-1920, 0, 1920, 1055}
	tests := []struct {
		name                string
		item                screenRect
		itemScreen, winScrn screenRect
		width               float64
		wantLeft, wantTop   float64
	}{
		{"centred under the item", screenRect{1200, 876, 30, 24}, primary, primary, 420, 1005, 872},
		{"kept inside the right edge", screenRect{1400, 876, 30, 24}, primary, primary, 420, 1440 - 8 - 420, 872},
		{"kept inside the left edge", screenRect{10, 876, 30, 24}, primary, primary, 420, 8, 872},
		{"wider than the screen: left side visible", screenRect{200, 876, 30, 24}, screenRect{0, 0, 400, 876}, screenRect{0, 0, 400, 876}, 420, 8, 872},
		{"item on another screen than the window", screenRect{-300, 1055, 30, 25}, left, primary, 420, -495, 1051},
		{"window on the item's other screen", screenRect{1200, 876, 30, 24}, primary, left, 420, 1005, 872},
		{"item screen unknown: just centred", screenRect{1400, 876, 30, 24}, screenRect{}, primary, 420, 1205, 872},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, y := popoverPosition(tc.item, tc.itemScreen, tc.winScrn, tc.width)
			gotLeft, gotTop := wailsTopLeft(x, y, tc.winScrn)
			if gotLeft != tc.wantLeft || gotTop != tc.wantTop {
				t.Errorf("SetPosition(%d, %d) puts the top-left at (%g, %g), want (%g, %g)",
					x, y, gotLeft, gotTop, tc.wantLeft, tc.wantTop)
			}
		})
	}
}
