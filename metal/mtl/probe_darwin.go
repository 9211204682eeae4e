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

// probeDevice is the system default device, created once (and kept:
// MTLCreateSystemDefaultDevice hands out the same GPU to every caller of a
// process); 0 when Metal cannot be loaded or there is no GPU.
func probeDevice() objc.ID {
	if bind() != nil {
		return 0
	}
	probeDev.once.Do(func() { withPool(func() { probeDev.dev = rt.createSystemDefaultDevice() }) })
	return probeDev.dev
}

// probeGPU reads the system default device's working-set figures.
func probeGPU() (workingSet, allocated uint64, ok bool) {
	dev := probeDevice()
	if dev == 0 {
		return 0, 0, false
	}
	return rt.msgUint(dev, sl(selRecommendedMaxWorkingSetSize)), rt.msgUint(dev, sl(selCurrentAllocatedSize)), true
}
