//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"math"
	"os"
)

// mapFile reads the whole file where mmap is not available.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d cannot be loaded", size)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
