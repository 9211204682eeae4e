package desktop

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"nibble/app/desktop/service"
	"nibble/internal/atomicfile"
)

// The answers of the questions loadModel asks.
const (
	answerLoadAnyway = "Load anyway"
	answerCancel     = "Cancel"
)

// loadModel checks req's estimate first and asks before a load that is
// tight (load anyway?) or that will not fit when a smaller context would
// (load with that context?). A load that will not fit is refused, with
// the advice, when nothing smaller fits or the user cancels; a cancelled
// tight load leaves everything as it was and is no error.
func (a *App) loadModel(req service.LoadRequest) (service.Status, error) {
	est, err := a.svc.CheckLoad(req)
	if err != nil {
		return a.svc.LoadModel(req) // refuses it in the service's words, state included
	}
	switch est.Verdict {
	case "tight":
		dl, err := a.dialogs()
		if err != nil {
			return a.svc.Status(), err
		}
		ans, err := dl.Ask(Question{
			Title: "Load anyway?",
			Message: fmt.Sprintf("%s at %d tokens with %s KV needs %s of the %s budget (%.0f%%), which leaves little memory for other apps.",
				a.svc.Describe(req.Path).Name, est.Ctx, est.KV, gib(est.Total), gib(est.Budget), 100*float64(est.Total)/float64(est.Budget)),
			Buttons: []string{answerLoadAnyway, answerCancel}, Default: answerLoadAnyway, Cancel: answerCancel, Warning: true,
		})
		if err != nil {
			return a.svc.Status(), fmt.Errorf("asking before the load: %w", err)
		}
		if ans != answerLoadAnyway {
			return a.svc.Status(), nil
		}
	case "will-not-fit":
		n, err := a.svc.SmallerContext(req)
		if err != nil || n == 0 {
			return a.svc.LoadModel(req) // refused, with the advice
		}
		dl, err := a.dialogs()
		if err != nil {
			return a.svc.Status(), err
		}
		label := "Load with " + contextLabel(n) + " context"
		ans, err := dl.Ask(Question{
			Title: label + "?",
			Message: fmt.Sprintf("%s will not fit at %d tokens with %s KV: it needs %s of the %s budget. With %d tokens it fits.",
				a.svc.Describe(req.Path).Name, est.Ctx, est.KV, gib(est.Total), gib(est.Budget), n),
			Buttons: []string{label, answerCancel}, Default: label, Cancel: answerCancel, Warning: true,
		})
		if err != nil {
			return a.svc.Status(), fmt.Errorf("asking before the load: %w", err)
		}
		if ans == label {
			req.Ctx = n
		}
		// With the original context LoadModel refuses, with the advice.
	}
	return a.svc.LoadModel(req)
}

// contextLabel is "8K" for 8192 tokens, "512-token" for 512.
func contextLabel(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprintf("%d-token", n)
}

func gib(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

// chooseModelFile asks for a GGUF file and adds it to the picker.
func (a *App) chooseModelFile() (string, error) {
	dl, err := a.dialogs()
	if err != nil {
		return "", err
	}
	path, err := dl.OpenFile("Open a GGUF model", []FilePattern{{Name: "GGUF models", Extensions: []string{"gguf"}}})
	if err != nil {
		return "", fmt.Errorf("open dialog: %w", err)
	}
	if path == "" {
		return "", nil
	}
	if _, err := a.svc.AddModel(path); err != nil {
		return "", err
	}
	return path, nil
}

// saveConversation asks where to save conversation id as Markdown (named
// after its title) and writes it there whole or not at all.
func (a *App) saveConversation(id int64) (string, error) {
	c, err := a.svc.Conversation(id)
	if err != nil {
		return "", err
	}
	md, err := a.svc.ExportConversation(id)
	if err != nil {
		return "", err
	}
	dl, err := a.dialogs()
	if err != nil {
		return "", err
	}
	path, err := dl.SaveFile("Export conversation", exportName(c.Title), []FilePattern{{Name: "Markdown", Extensions: []string{"md"}}})
	if err != nil {
		return "", fmt.Errorf("save dialog: %w", err)
	}
	if path == "" {
		return "", nil
	}
	if err := atomicfile.WriteFile(path, []byte(md), 0o644); err != nil {
		return "", fmt.Errorf("saving the conversation: %w", err)
	}
	return path, nil
}

// exportName is a file name made of a conversation's title: characters
// that some file system refuses become "-", and it is kept short.
func exportName(title string) string {
	name := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || strings.ContainsRune(`/\:*?"<>|`, r) {
			return '-'
		}
		return r
	}, title)
	if r := []rune(name); len(r) > 80 {
		name = string(r[:80])
	}
	name = strings.Trim(name, " .-")
	if name == "" {
		name = "Conversation"
	}
	return name + ".md"
}

// canHideWindow says whether hiding the window leaves a way back to it:
// the menu-bar item. The Linux window has none, and hidden it would be
// lost until the app is killed.
func (a *App) canHideWindow() bool {
	return a.hasStatusItem != nil && a.hasStatusItem()
}

// hideWindow hides the window (Escape in the popover) where it can be
// shown again, and does nothing elsewhere.
func (a *App) hideWindow() {
	if !a.canHideWindow() {
		return
	}
	if w := a.getShell().Window; w != nil {
		w.Hide()
	}
}

// quit quits through the toolkit, so that Shutdown runs.
func (a *App) quit() {
	if q := a.getShell().Quit; q != nil {
		q()
	}
}

// dialogs are the native dialogs, once the window is up.
func (a *App) dialogs() (Dialogs, error) {
	if d := a.getShell().Dialogs; d != nil {
		return d, nil
	}
	return nil, errors.New("no dialogs: the window is not up yet")
}
