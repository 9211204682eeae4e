package gguf

import (
	"io"
	"nibble/internal/testdata"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// sharedTestdata is the shared fixtures' folder (internal/testdata.Dir).
func sharedTestdata(t testing.TB) string { return testdata.Dir(t) }

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
