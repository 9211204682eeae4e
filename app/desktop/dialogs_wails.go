//go:build !darwin && cgo

package desktop

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	wails "github.com/wailsapp/wails/v2/pkg/runtime"
)

// nativeDialogs are Wails' runtime dialogs: GTK's own on Linux, run on
// the toolkit's loop, so there is never a second GTK loop.
func nativeDialogs(ctx context.Context) Dialogs { return wailsDialogs{ctx} }

type wailsDialogs struct{ ctx context.Context }

func filters(patterns []FilePattern) []wails.FileFilter {
	var out []wails.FileFilter
	for _, p := range patterns {
		globs := make([]string, len(p.Extensions))
		for i, e := range p.Extensions {
			globs[i] = "*." + e
		}
		out = append(out, wails.FileFilter{DisplayName: p.Name, Pattern: strings.Join(globs, ";")})
	}
	return out
}

func (d wailsDialogs) OpenFile(title string, patterns []FilePattern) (string, error) {
	return wails.OpenFileDialog(d.ctx, wails.OpenDialogOptions{Title: title, Filters: filters(patterns)})
}

func (d wailsDialogs) SaveFile(title, defaultName string, patterns []FilePattern) (string, error) {
	return wails.SaveFileDialog(d.ctx, wails.SaveDialogOptions{Title: title, DefaultFilename: defaultName,
		Filters: filters(patterns), CanCreateDirectories: true})
}

// Ask shows q. GTK's message dialog in Wails has only Yes and No buttons,
// so on Linux the message says which answer each stands for: Yes is
// q.Default, No q.Cancel.
func (d wailsDialogs) Ask(q Question) (string, error) {
	if len(q.Buttons) == 0 {
		return "", fmt.Errorf("question %q has no buttons", q.Title)
	}
	yes := q.Default
	if yes == "" {
		yes = q.Buttons[0]
	}
	msg := q.Message
	if runtime.GOOS == "linux" {
		msg += "\n\nYes: " + yes + "\nNo: " + q.Cancel
		// Wails passes the message to GTK as a printf format.
		msg = strings.ReplaceAll(msg, "%", "%%")
	}
	typ := wails.QuestionDialog
	res, err := wails.MessageDialog(d.ctx, wails.MessageDialogOptions{Type: typ, Title: q.Title, Message: msg,
		Buttons: q.Buttons, DefaultButton: q.Default, CancelButton: q.Cancel})
	if err != nil {
		return "", fmt.Errorf("question %q: %w", q.Title, err)
	}
	switch {
	case res == "Yes":
		return yes, nil
	case slices.Contains(q.Buttons, res): // systems that show the buttons themselves
		return res, nil
	}
	return q.Cancel, nil
}
