//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps size bytes of fh read-only and shared, so pages come from the
// page cache and are shared with other processes mapping the same model.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d cannot be mapped", size)
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
