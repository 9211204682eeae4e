//go:build darwin && cgo

package desktop

import (
	"context"
	"errors"
	"fmt"

	"github.com/progrium/darwinkit/macos/appkit"
	"github.com/progrium/darwinkit/objc"
	"github.com/sqweek/dialog"
)

// nativeDialogs are macOS's own panels and alerts. The open and save
// panels come from sqweek/dialog, which runs them on the main thread
// itself. Questions are NSAlerts made through darwinkit: sqweek/dialog's
// only question is Yes/No, and a question's buttons say what they do
// ("Load with 8K context", "Cancel") and map Return and Escape to
// Question.Default and Question.Cancel.
func nativeDialogs(context.Context) Dialogs { return macDialogs{} }

type macDialogs struct{}

func (macDialogs) OpenFile(title string, patterns []FilePattern) (string, error) {
	b := dialog.File().Title(title)
	for _, p := range patterns {
		b = b.Filter(p.Name, p.Extensions...)
	}
	activateApp()
	path, err := b.Load()
	if errors.Is(err, dialog.ErrCancelled) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("open panel: %w", err)
	}
	return path, nil
}

func (macDialogs) SaveFile(title, defaultName string, patterns []FilePattern) (string, error) {
	b := dialog.File().Title(title).SetStartFile(defaultName)
	for _, p := range patterns {
		b = b.Filter(p.Name, p.Extensions...)
	}
	activateApp()
	path, err := b.Save()
	if errors.Is(err, dialog.ErrCancelled) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("save panel: %w", err)
	}
	return path, nil
}

// Ask shows q as an alert. The first button is the rightmost, as macOS
// orders them.
func (macDialogs) Ask(q Question) (string, error) {
	if len(q.Buttons) == 0 {
		return "", errors.New("ask: the question has no buttons")
	}
	var answer string
	onMainSync(func() { answer = runAlert(q) })
	return answer, nil
}

// runAlert runs on the main thread.
func runAlert(q Question) string {
	alert := appkit.NewAlert()
	defer alert.Release()
	if q.Title != "" {
		alert.SetMessageText(q.Title)
		alert.SetInformativeText(q.Message)
	} else {
		alert.SetMessageText(q.Message)
	}
	if q.Warning {
		alert.SetAlertStyle(appkit.AlertStyleCritical) // the caution icon
	}
	for _, title := range q.Buttons {
		b := alert.AddButtonWithTitle(title)
		// NSAlert gives Return to the first button and Escape to one
		// titled "Cancel"; the question says which.
		switch title {
		case q.Default:
			b.SetKeyEquivalent("\r")
		case q.Cancel:
			b.SetKeyEquivalent("\x1b")
		default:
			b.SetKeyEquivalent("")
		}
	}
	activateApp()
	i := int(alert.RunModal() - appkit.AlertFirstButtonReturn)
	if i < 0 || i >= len(q.Buttons) {
		return q.Cancel
	}
	return q.Buttons[i]
}

// activateApp brings Nibble forward, so that a panel or alert does not
// open behind the app in front: an Accessory app is not activated by
// showing one.
func activateApp() {
	onMainSync(func() {
		// Deprecated in macOS 14 (darwinkit has no binding for it) but the
		// only way before it, and still honoured.
		objc.Call[objc.Void](appkit.Application_SharedApplication(), objc.Sel("activateIgnoringOtherApps:"), true)
	})
}
