package cpu

import (
	"unsafe"
)

// offHeapMin is the size from which allocations bypass the Go heap. A KV
// cache of tens of GiB on the heap would make the garbage collector's goal
// (twice the live heap) allow as much garbage again before collecting.
const offHeapMin = 1 << 20

// allocRaw returns n zeroed bytes: small ones from the Go heap, large ones
// mapped from the OS. release gives them back; Close releases what is left.
func (b *Backend) allocRaw(n int) []byte {
	b.allocated.Add(int64(n))
	if n >= offHeapMin {
		if m, err := mapAnon(n); err == nil {
			b.mu.Lock()
			if b.mappings == nil {
				b.mappings = map[*byte][]byte{}
			}
			b.mappings[unsafe.SliceData(m)] = m
			b.mu.Unlock()
			return m
		}
	}
	return make([]byte, n)
}

// release returns one allocation made by allocRaw: the count goes down by its
// size and a mapping goes back to the OS at once (heap memory goes with the
// garbage collector).
func (b *Backend) release(p []byte) {
	if p == nil {
		return
	}
	b.allocated.Add(-int64(len(p)))
	b.mu.Lock()
	m, mapped := b.mappings[unsafe.SliceData(p)]
	if mapped {
		delete(b.mappings, unsafe.SliceData(p))
	}
	b.mu.Unlock()
	if mapped {
		unmapAnon(m)
	}
}

// releaseAll unmaps every off-heap allocation still held.
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
