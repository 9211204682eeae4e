package desktop

import "math"

// The popover's geometry, kept free of AppKit so that it is tested on every
// system; statusitem_darwin.go feeds it the frames AppKit reports.

// screenRect is a rectangle in AppKit's global screen coordinates: points,
// origin at the bottom left of the primary screen, y growing upwards.
type screenRect struct{ X, Y, W, H float64 }

const (
	popoverGap    = 4 // points between the menu bar and the window's top
	popoverMargin = 8 // points the window keeps from the screen's sides
)

// popoverPosition is the (x, y) to pass to Wails' window SetPosition so
// that a window width points wide hangs under the status item whose
// button window has frame item: centred on it, inside itemScreen (the
// visible frame of the item's screen; zero when unknown) and just below
// the menu bar.
//
// Wails' darwin SetPosition (WailsContext.m) counts x rightwards from the
// left of the visible frame of the screen the window is on when the call
// runs, and y downwards from its top, to the window's top-left corner.
// That screen (winScreen) need not be the item's: the offsets are relative
// to it and may be negative.
func popoverPosition(item, itemScreen, winScreen screenRect, width float64) (x, y int) {
	left := item.X + item.W/2 - width/2
	top := item.Y - popoverGap
	if itemScreen.W > 0 && itemScreen.H > 0 {
		left = math.Min(left, itemScreen.X+itemScreen.W-popoverMargin-width)
		// After the right edge, so that a window wider than the screen
		// keeps its left side (and the frontend's header) visible.
		left = math.Max(left, itemScreen.X+popoverMargin)
		top = math.Min(top, itemScreen.Y+itemScreen.H-popoverGap)
	}
	return int(math.Round(left - winScreen.X)), int(math.Round(winScreen.Y + winScreen.H - top))
}
