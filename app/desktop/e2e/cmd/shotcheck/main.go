// Command shotcheck fails when a screenshot is blank (tiny, one colour, or
// too few colours for any text), so a window that never painted does not
// pass a smoke test.
//
//	go run ./app/desktop/e2e/cmd/shotcheck SHOT.png...
package main

import (
	"fmt"
	"os"

	"nibble/app/desktop/e2e"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: shotcheck SHOT.png...")
		os.Exit(2)
	}
	bad := false
	for _, p := range os.Args[1:] {
		why, err := e2e.Blank(p)
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "shotcheck:", err)
			bad = true
		case why != "":
			fmt.Fprintf(os.Stderr, "shotcheck: %s is blank: %s\n", p, why)
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}
