package cpu

import (
	"unsafe"
)

// offHeapMin is the size from which allocations bypass the Go heap. A KV
// cache of tens of GiB on the heap would make the garbage collector's goal
// (twice the live heap) allow as much garbage again before collecting.
const offHeapMin = 1 << 20

// allocRaw returns n zeroed bytes: small ones from the Go heap, large ones
// mapped from the OS and released by Close.
func (b *Backend) allocRaw(n int) []byte {
	b.allocated.Add(int64(n))
	if n >= offHeapMin {
		if m, err := mapAnon(n); err == nil {
			b.mu.Lock()
			b.mappings = append(b.mappings, m)
			b.mu.Unlock()
			return m
		}
	}
	return make([]byte, n)
}

// releaseAll unmaps every off-heap allocation.
func (b *Backend) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.mappings {
		unmapAnon(m)
	}
	b.mappings = nil
}

func bytesAsFloats(p []byte) []float32 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&p[0])), len(p)/4)
}
