package estimate

import (
	"os"
	"path/filepath"
	"testing"
)

// repoRoot is the directory holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// testdataDir is ../shared/testdata next to the repository; tests skip
// without it.
func testdataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "..", "shared", "testdata")
	if _, err := os.Stat(filepath.Join(dir, "models")); err != nil {
		t.Skipf("shared test data not found at %s", dir)
	}
	return dir
}
