// Package emutest decides what a test does when the MSL emulator cannot
// run (no clang-19): skip with the reason on a developer's machine, fail in
// CI, where the Makefile installs clang-19 and a skipped kernel test would
// hide a broken kernel behind a green run.
package emutest

import (
	"os"
	"testing"
)

// Unavailable skips t with err (from emulator.Available) and a hint, or
// fails it when the CI environment variable is set.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("the MSL emulator must run in CI: %v", err)
		return
	}
	t.Skipf("MSL emulator tests skipped: %v", err)
}
