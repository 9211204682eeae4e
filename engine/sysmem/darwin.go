package sysmem

import (
	"encoding/binary"
	"fmt"
)

// vmStats64Bytes is sizeof(struct vm_statistics64): HOST_VM_INFO64_COUNT
// (38) 32-bit words.
const vmStats64Bytes = 38 * 4

// vmStats holds the fields of struct vm_statistics64 (mach/vm_statistics.h)
// the budget needs, in pages.
type vmStats struct {
	free, active, inactive, wired, purgeable, speculative uint64
}

// decodeVMStats reads the host_statistics64(HOST_VM_INFO64) buffer. Layout:
// four natural_t counts (free, active, inactive, wire), nine uint64
// counters, then purgeable_count at byte 88 and speculative_count at 92.
func decodeVMStats(b []byte) (vmStats, error) {
	if len(b) < 96 {
		return vmStats{}, fmt.Errorf("vm_statistics64: %d bytes, need at least 96", len(b))
	}
	u := func(off int) uint64 { return uint64(binary.LittleEndian.Uint32(b[off:])) }
	return vmStats{free: u(0), active: u(4), inactive: u(8), wired: u(12), purgeable: u(88), speculative: u(92)}, nil
}

// reclaimablePages is what the kernel can hand out without swapping: free
// pages (xnu's free_count already includes the speculative ones), inactive
// pages (clean file cache and idle anonymous memory it pages or compresses
// first) and purgeable pages (volatile caches apps agreed to lose).
func (v vmStats) reclaimablePages() uint64 { return v.free + v.inactive + v.purgeable }

// macInfo assembles Info from the raw macOS figures: hw.memsize,
// iogpu.wired_limit_mb, the kernel page size and the VM statistics.
func macInfo(memsize, wiredLimitMB, pageSize uint64, vm vmStats) Info {
	info := Info{OS: "darwin", TotalRAM: memsize, WiredLimitMB: wiredLimitMB}
	info.AvailableRAM = min(vm.reclaimablePages()*pageSize, memsize)
	if wiredLimitMB > 0 {
		info.WiredLimit = wiredLimitMB << 20
	} else {
		info.WiredLimit = DefaultWiredLimit(memsize)
	}
	return info
}
