//go:build darwin

package mtl

import (
	"sync"

	"github.com/ebitengine/purego/objc"

	"nibble/engine/sysmem"
)

// The memory estimator's budget on macOS (engine/sysmem.Info.GPUCap) takes
// Metal's recommendedMaxWorkingSetSize when the iogpu.wired_limit_mb sysctl
// is not set, and reports currentAllocatedSize: this package feeds them
// through sysmem.GPUProbe as soon as it is linked in.
func init() {
	if sysmem.GPUProbe == nil {
		sysmem.GPUProbe = probeGPU
	}
}

var probeDev struct {
	once sync.Once
	dev  objc.ID
}

// probeGPU reads the system default device's working-set figures; the
// device is created once (and kept: MTLCreateSystemDefaultDevice hands out
// the same GPU to every caller of a process).
func probeGPU() (workingSet, allocated uint64, ok bool) {
	if bind() != nil {
		return 0, 0, false
	}
	probeDev.once.Do(func() { withPool(func() { probeDev.dev = rt.createSystemDefaultDevice() }) })
	if probeDev.dev == 0 {
		return 0, 0, false
	}
	return rt.msgUint(probeDev.dev, sl(selRecommendedMaxWorkingSetSize)), rt.msgUint(probeDev.dev, sl(selCurrentAllocatedSize)), true
}

// SystemMemory is Memory of the system default device, without opening a
// Device (for Diagnostics); ok is false when there is no Metal device.
func SystemMemory() (m Memory, ok bool) {
	ws, alloc, ok := probeGPU()
	if !ok {
		return Memory{}, false
	}
	m = Memory{RecommendedMaxWorkingSet: ws, CurrentAllocated: alloc,
		MaxBufferLength: rt.msgUint(probeDev.dev, sl(selMaxBufferLength)),
		UnifiedMemory:   rt.msgBool(probeDev.dev, sl(selHasUnifiedMemory))}
	m.MemSize, _ = Sysctl("hw.memsize")
	m.WiredLimitMB, _ = Sysctl("iogpu.wired_limit_mb")
	return m, true
}
