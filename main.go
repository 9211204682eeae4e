// Command nibble is the Nibble menu-bar app; `nibble <subcommand>` runs the CLI.
package main

import (
	"os"

	"nibble/app/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
