//go:build !cgo

package desktop

import (
	"fmt"
	"os"
)

// Run is the app's entry point; a build without cgo has no window.
func Run() int {
	fmt.Fprintln(os.Stderr, "nibble: this build has no app window; rebuild with cgo (make app), or use a subcommand: nibble help")
	return 2
}
