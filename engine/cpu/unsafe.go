package cpu

import "unsafe"

// unsafeF32 views little-endian F32 tensor bytes from the mapping as floats
// (every target we build for is little-endian; GGUF data is 32-byte aligned).
func unsafeF32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
