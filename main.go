// Command nibble is the Nibble menu-bar app; `nibble <subcommand>` runs the CLI.
package main

import (
	"os"
	"strings"

	"nibble/app/cli"
	"nibble/app/desktop"
)

func main() {
	args := os.Args[1:]
	// Finder may pass a process serial number (-psn_...) to an app it opens.
	if len(args) == 1 && strings.HasPrefix(args[0], "-psn_") {
		args = nil
	}
	if len(args) == 0 {
		os.Exit(desktop.Run())
	}
	os.Exit(cli.Main(args))
}
