// Package mtl is the darwin device layer: metal/device.Device on Apple's
// Metal, through github.com/ebitengine/purego and its objc package, with
// cgo off. Open gives the system default GPU (CoreGraphics, then Metal, are
// loaded first); NewLibrary compiles the .metal sources with
// newLibraryWithSource; pipelines are specialised by function constants and
// cached; buffers are shared-storage MTLBuffers, and WrapMemory wraps the
// model's file mapping without copying (newBufferWithBytesNoCopy), split
// into overlapping views past maxBufferLength; each CommandList is one
// MTLCommandBuffer whose failures become typed errors (ErrOutOfMemory,
// ErrTimeout, ...). On macOS 15+ an MTLResidencySet pins the weights and
// the KV cache; Residency says what applies.
//
// Only the platform-neutral parts build elsewhere (the selector table, the
// view split, constant encoding, error mapping), so Linux tests check them;
// Open and Device exist on darwin only.
package mtl
