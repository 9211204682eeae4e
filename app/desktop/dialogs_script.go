package desktop

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// TestDialogsEnv, set to "cancel" or "default", replaces the native
// dialogs with scripted ones for tests: every question is answered with
// its Cancel (or Default) button, open and save dialogs are cancelled, and
// each prints one line on stdout, "dialog: <title>: <message's first
// line> -> <answer>".
const TestDialogsEnv = "NIBBLE_TEST_DIALOGS"

// TestSaveDirEnv, with TestDialogsEnv, makes the scripted save dialog
// answer <dir>/<suggested name> instead of cancelling.
const TestSaveDirEnv = "NIBBLE_TEST_SAVE_DIR"

// scriptedDialogs answer without asking anyone.
type scriptedDialogs struct {
	useDefault bool
	saveDir    string
	out        func() io.Writer

	mu sync.Mutex // one line at a time
}

// scriptedFromEnv is the scripted dialogs TestDialogsEnv asks for, nil
// when it is unset. Lines go to out().
func scriptedFromEnv(out func() io.Writer) (*scriptedDialogs, error) {
	mode := os.Getenv(TestDialogsEnv)
	if mode == "" {
		return nil, nil
	}
	if mode != "cancel" && mode != "default" {
		return nil, fmt.Errorf("$%s=%q: want cancel or default", TestDialogsEnv, mode)
	}
	dir := os.Getenv(TestSaveDirEnv)
	if dir != "" && !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("$%s=%q: want an absolute folder", TestSaveDirEnv, dir)
	}
	return &scriptedDialogs{useDefault: mode == "default", saveDir: dir, out: out}, nil
}

func (s *scriptedDialogs) say(title, message, answer string) {
	first, _, _ := strings.Cut(message, "\n")
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out(), "dialog: %s: %s -> %s\n", title, first, answer)
}

func (s *scriptedDialogs) OpenFile(title string, _ []FilePattern) (string, error) {
	s.say(title, "choose a file to open", "cancel")
	return "", nil
}

func (s *scriptedDialogs) SaveFile(title, defaultName string, _ []FilePattern) (string, error) {
	if s.saveDir == "" {
		s.say(title, "save as "+defaultName, "cancel")
		return "", nil
	}
	path := filepath.Join(s.saveDir, filepath.Base(defaultName))
	s.say(title, "save as "+defaultName, path)
	return path, nil
}

func (s *scriptedDialogs) Ask(q Question) (string, error) {
	if len(q.Buttons) == 0 {
		return "", fmt.Errorf("question %q has no buttons", q.Title)
	}
	ans := q.Cancel
	if s.useDefault {
		ans = q.Default
	}
	if ans == "" { // unnamed: Escape takes the last button, Return the first
		ans = q.Buttons[len(q.Buttons)-1]
		if s.useDefault {
			ans = q.Buttons[0]
		}
	}
	s.say(q.Title, q.Message, ans)
	return ans, nil
}
