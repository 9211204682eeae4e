// Package sysmem reports how much memory this machine can give a model: the
// physical and currently available RAM, the cgroup limit on Linux, and on
// macOS the GPU wired-memory limit that caps what Metal may keep resident.
package sysmem

import (
	"fmt"
	"runtime"
)

// Info is one snapshot of the machine's memory. Zero means "not known" or
// "no such limit" for every field except TotalRAM and AvailableRAM.
type Info struct {
	OS           string // runtime.GOOS
	TotalRAM     uint64 // physical memory
	AvailableRAM uint64 // what could be handed to a new allocation now without swapping
	CgroupLimit  uint64 // Linux cgroup memory limit: v2 memory.max, v1 memory.limit_in_bytes (0 = none)
	CgroupUsage  uint64 // usage of that cgroup minus its reclaimable page cache
	// macOS: iogpu.wired_limit_mb as set (0 = the OS default applies) and the
	// effective GPU wired limit in bytes (the set value, else the default).
	WiredLimitMB uint64
	WiredLimit   uint64
	// Metal's recommendedMaxWorkingSetSize and currentAllocatedSize, filled
	// through GPUProbe once the Metal backend sets it.
	GPUWorkingSet uint64
	GPUAllocated  uint64
}

// GPUProbe is set by the Metal backend: it returns the device's
// recommendedMaxWorkingSetSize and currentAllocatedSize in bytes, ok=false
// when no GPU device is available. Nil until a GPU backend registers it.
var GPUProbe func() (workingSet, allocated uint64, ok bool)

// Probe reads the memory figures of this machine.
func Probe() (Info, error) {
	info, err := probe()
	if err != nil {
		return Info{}, fmt.Errorf("sysmem: %w", err)
	}
	info.OS = runtime.GOOS
	if GPUProbe != nil {
		if ws, alloc, ok := GPUProbe(); ok {
			info.GPUWorkingSet, info.GPUAllocated = ws, alloc
		}
	}
	return info, nil
}

// Budget is the memory a model (weights, KV cache, scratch, runtime
// overhead) may occupy on this machine now.
//
// Linux: MemAvailable, further capped by the room left in the cgroup.
// macOS: min(GPU cap, AvailableRAM), where the GPU cap is the raised wired
// limit when iogpu.wired_limit_mb is set, else Metal's working set when the
// Metal backend reported it, else the default wired limit (DefaultWiredLimit).
// AvailableRAM is "physical RAM minus what other processes use now".
func (i Info) Budget() uint64 {
	if i.OS == "darwin" {
		return min(i.GPUCap(), i.AvailableRAM)
	}
	b := i.AvailableRAM
	if i.CgroupLimit > 0 {
		room := uint64(0)
		if i.CgroupLimit > i.CgroupUsage {
			room = i.CgroupLimit - i.CgroupUsage
		}
		b = min(b, room)
	}
	return b
}

// GPUCap is the most memory Metal will keep resident on macOS (0 elsewhere).
func (i Info) GPUCap() uint64 {
	if i.OS != "darwin" {
		return 0
	}
	switch {
	case i.WiredLimitMB > 0:
		// A raised (or lowered) limit is what the driver enforces; Metal's
		// working set follows it, so the sysctl value is authoritative.
		return i.WiredLimitMB << 20
	case i.GPUWorkingSet > 0:
		return i.GPUWorkingSet
	case i.WiredLimit > 0:
		return i.WiredLimit
	}
	return DefaultWiredLimit(i.TotalRAM)
}

// DefaultWiredLimit is the GPU wired limit macOS applies when
// iogpu.wired_limit_mb is 0: about 2/3 of RAM up to 36 GiB, 3/4 above.
// Apple does not document it; the figures are Metal's reported
// recommendedMaxWorkingSetSize on real machines, e.g. 21845.34 MB on a
// 32 GB M1 Max (exactly 2/3; llama.cpp PR #2011) and about 49 GB on 64 GB M1/M2
// Max (3/4; llama.cpp issue #1870). Newer macOS releases may allow a bit more
// (107.5 GiB reported on 128 GiB, antirez/ds4 #893), so Metal's own figure,
// when the backend provides it, takes precedence in GPUCap.
func DefaultWiredLimit(totalRAM uint64) uint64 {
	if totalRAM <= 36<<30 {
		return totalRAM / 3 * 2
	}
	return totalRAM / 4 * 3
}

// WiredSafetyMargin is the RAM Nibble leaves to macOS and other apps when it
// suggests raising iogpu.wired_limit_mb: 1/8 of RAM, at least 4 GiB (8 GiB
// on a 64 GiB Mac, so the suggested limit never exceeds 56 GiB there).
func WiredSafetyMargin(totalRAM uint64) uint64 {
	return max(totalRAM/8, 4<<30)
}

// MaxWiredLimit is the highest GPU wired limit Nibble will suggest.
func MaxWiredLimit(totalRAM uint64) uint64 {
	m := WiredSafetyMargin(totalRAM)
	if totalRAM <= m {
		return 0
	}
	return totalRAM - m
}
