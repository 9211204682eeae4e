// Package testdata locates the shared test fixtures (testdata/ of the folder
// beside the checkout)
// for tests, skipping them with a clear message when it is absent.
package testdata

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot is the directory holding go.mod, above the test's directory.
func RepoRoot(t testing.TB) string {
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
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// Dir returns the shared testdata folder or skips t.
func Dir(t testing.TB) string {
	t.Helper()
	td := filepath.Join(RepoRoot(t), "..", "shared", "testdata")
	if _, err := os.Stat(filepath.Join(td, "README.md")); err != nil {
		t.Skipf("skipping: shared test data not found at %s (CI provides it beside the checkout)", td)
	}
	return td
}

// Models lists the tiny reference models, by file name.
var Models = []string{
	"tiny-llama-spm-f16.gguf",
	"tiny-llama-spm-q4_0.gguf",
	"tiny-llama-spm-q4_k_m.gguf",
	"tiny-llama3-q8_0.gguf",
	"tiny-qwen2-q4_0.gguf",
}
