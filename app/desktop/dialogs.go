package desktop

// Dialogs are the native dialogs the app shows: macOS uses
// github.com/sqweek/dialog for its open and save panels and an NSAlert
// (through darwinkit) for questions, whose buttons carry their own titles
// (dialogs_darwin.go); other systems use Wails' runtime dialogs
// (dialogs_wails.go), so there is never a second GTK loop. Each cgo build
// defines nativeDialogs(ctx context.Context) Dialogs, which run_cgo.go
// calls with the Wails context once the run loop is up;
// NIBBLE_TEST_DIALOGS replaces them with scripted answers
// (dialogs_script.go). The methods are called from the bound methods'
// goroutines and return when the dialog closes.
type Dialogs interface {
	// OpenFile asks for a file to open; "" when the user cancels.
	OpenFile(title string, patterns []FilePattern) (string, error)
	// SaveFile asks where to save a file named defaultName; "" when the
	// user cancels.
	SaveFile(title, defaultName string, patterns []FilePattern) (string, error)
	// Ask shows q and returns the button the user chose (q.Cancel when the
	// dialog is dismissed).
	Ask(q Question) (string, error)
}

// FilePattern is one entry of a file dialog's type filter.
type FilePattern struct {
	Name       string   // e.g. "GGUF models"
	Extensions []string // without the dot, e.g. "gguf"
}

// Question is a modal question with two or more buttons.
type Question struct {
	Title   string
	Message string
	Buttons []string // in display order; on macOS the first is the rightmost
	Default string   // the button Return presses
	Cancel  string   // the button Escape presses, and the answer when dismissed
	Warning bool     // a caution icon (the load will not fit, data may be lost)
}
