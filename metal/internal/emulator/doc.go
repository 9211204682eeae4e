// Package emulator runs Metal compute kernels on the CPU, on Linux: the MSL
// pre-pass (metal/internal/msltoc) turns .metal sources into C++, clang
// builds them with the shim and the runtime (rt/) into one shared library,
// cached by a hash of everything that goes into it, and purego loads it,
// without cgo. Device implements metal/device.Device, so the code that
// encodes command lists runs here unchanged. See metal/README.md.
//
// Each threadgroup runs on one OS thread and its GPU threads are fibers
// that switch at every barrier and simd collective. The runtime reports
// divergent simd collectives, barriers not reached by every thread, and
// threadgroup memory overuse with the .metal file and line, as an error
// from Sync; threadgroup memory starts as NaN.
//
// On other systems the package is empty: on macOS the backend uses Metal.
package emulator
