package gguf

import (
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// sharedTestdata is ../shared/testdata next to the repository root.
func sharedTestdata(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root (go.mod) not found")
		}
		dir = parent
	}
	td := filepath.Join(dir, "..", "shared", "testdata")
	if _, err := os.Stat(td); err != nil {
		t.Skipf("shared test data not found at %s: %v", td, err)
	}
	return td
}

// globTestdata lists shared test files matching pattern, skipping if none.
func globTestdata(t testing.TB, pattern string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(sharedTestdata(t), pattern))
	if len(files) == 0 {
		t.Skipf("no %s in shared test data", pattern)
	}
	return files
}

// countingReaderAt counts the requests and bytes a parse asks for.
type countingReaderAt struct {
	r     io.ReaderAt
	calls atomic.Int64
	bytes atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	n, err := c.r.ReadAt(p, off)
	c.bytes.Add(int64(n))
	return n, err
}
