// Command darwincheck type-checks the macOS build of the app on any
// system. The darwin files of app/desktop use cgo (darwinkit, Wails'
// Cocoa frontend, sqweek/dialog), so `go vet` and `go build` cannot check
// them without a Mac and its SDK. This runs go/types over the darwin/arm64
// file set instead, with `import "C"` faked (types.Config.FakeImportC):
// every package outside the module is checked for its declarations, and
// the module's own packages (those named by the patterns and what they
// import from the module) in full, function bodies included.
//
//	go run ./app/desktop/darwincheck [-tags desktop,production] [packages]
//
// With no packages it checks "." (the app binary and all it imports).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	tags := flag.String("tags", DefaultTags, "build tags, comma-separated (those of `wails build` for production)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: darwincheck [-tags list] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	start := time.Now()
	res, err := Check(Options{Tags: *tags, Patterns: patterns})
	if err != nil {
		fmt.Fprintln(os.Stderr, "darwincheck:", err)
		os.Exit(2)
	}
	for _, e := range res.Errors {
		fmt.Fprintln(os.Stderr, e)
	}
	if len(res.Errors) > 0 {
		fmt.Fprintf(os.Stderr, "darwincheck: %d errors in the darwin/arm64 build\n", len(res.Errors))
		os.Exit(1)
	}
	fmt.Printf("darwincheck: darwin/arm64 (cgo, tags %s): %d packages type-checked, %d of them in full, in %.1fs\n",
		*tags, res.Packages, len(res.Full), time.Since(start).Seconds())
}
