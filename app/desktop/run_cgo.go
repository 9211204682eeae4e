//go:build cgo

package desktop

import (
	"context"
	"fmt"
	"os"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	"github.com/wailsapp/wails/v2/pkg/runtime"

	"nibble/frontend"
)

// Popover size: small, like a menu-bar popover.
const (
	windowWidth  = 420
	windowHeight = 640
)

// Run starts the app and returns its exit status when it quits.
func Run() int {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nibble:", err)
		return 1
	}
	return 0
}

func run() error {
	d, err := New()
	if err != nil {
		return err
	}
	wb := d.Platform.Window()
	err = wails.Run(&options.App{
		Title:             "Nibble",
		Width:             windowWidth,
		Height:            windowHeight,
		MinWidth:          360,
		MinHeight:         420,
		Frameless:         wb.Frameless,
		StartHidden:       wb.StartHidden,
		HideWindowOnClose: wb.HideOnClose,
		BackgroundColour:  &options.RGBA{R: 0x1c, G: 0x1c, B: 0x1e, A: 0xff},
		AssetServer:       &assetserver.Options{Assets: frontend.Assets()},
		Bind:              []any{d.App},
		// Files dropped on the window reach the frontend as paths
		// (runtime.OnFileDrop): a .gguf is added to the models.
		DragAndDrop: &options.DragAndDrop{EnableFileDrop: true},
		OnStartup: func(ctx context.Context) {
			d.Startup(ctx, Shell{
				Window:  window{ctx},
				Emit:    func(name string, data any) { runtime.EventsEmit(ctx, name, data) },
				Dialogs: nativeDialogs(ctx),
				Quit:    func() { runtime.Quit(ctx) },
			})
		},
		OnShutdown: func(context.Context) { d.Shutdown() },
		Mac: &mac.Options{
			TitleBar:             mac.TitleBarHiddenInset(),
			WebviewIsTransparent: true,
			About:                &mac.AboutInfo{Title: "Nibble", Message: "A private LLM in the menu bar."},
		},
		Linux: &linux.Options{ProgramName: "nibble"},
	})
	if err != nil {
		return fmt.Errorf("app window: %w", err)
	}
	return nil
}

// window is WindowControl through the Wails runtime.
type window struct{ ctx context.Context }

func (w window) Show()                { runtime.WindowShow(w.ctx) }
func (w window) Hide()                { runtime.WindowHide(w.ctx) }
func (w window) SetPosition(x, y int) { runtime.WindowSetPosition(w.ctx, x, y) }
