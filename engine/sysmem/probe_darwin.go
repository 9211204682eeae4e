//go:build darwin

package sysmem

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libSystem entry points, bound once through purego (no cgo).
var sys struct {
	once             sync.Once
	err              error
	sysctlbyname     func(name string, oldp unsafe.Pointer, oldlenp *uintptr, newp unsafe.Pointer, newlen uintptr) int32
	machHostSelf     func() uint32
	hostStatistics64 func(host uint32, flavor int32, info unsafe.Pointer, count *uint32) int32
	hostPageSize     func(host uint32, size *uintptr) int32
	host             uint32
}

const hostVMInfo64 = 4 // HOST_VM_INFO64 (mach/host_info.h)

func bind() error {
	sys.once.Do(func() {
		lib, err := purego.Dlopen("/usr/lib/libSystem.B.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			sys.err = fmt.Errorf("load libSystem: %w", err)
			return
		}
		purego.RegisterLibFunc(&sys.sysctlbyname, lib, "sysctlbyname")
		purego.RegisterLibFunc(&sys.machHostSelf, lib, "mach_host_self")
		purego.RegisterLibFunc(&sys.hostStatistics64, lib, "host_statistics64")
		purego.RegisterLibFunc(&sys.hostPageSize, lib, "host_page_size")
		// mach_host_self returns a send right each call; keep one.
		sys.host = sys.machHostSelf()
	})
	return sys.err
}

// Sysctl reads an integer sysctl of 4 or 8 bytes through libSystem's
// sysctlbyname, e.g. "iogpu.wired_limit_mb" or "hw.memsize" (darwin only).
func Sysctl(name string) (uint64, error) {
	if err := bind(); err != nil {
		return 0, err
	}
	return sysctlUint(name)
}

// sysctlUint is Sysctl once bind has succeeded.
func sysctlUint(name string) (uint64, error) {
	var buf [8]byte
	n := uintptr(len(buf))
	if rc := sys.sysctlbyname(name, unsafe.Pointer(&buf[0]), &n, nil, 0); rc != 0 {
		return 0, fmt.Errorf("sysctl %s failed (%d)", name, rc)
	}
	switch n {
	case 4:
		return uint64(binary.LittleEndian.Uint32(buf[:])), nil
	case 8:
		return binary.LittleEndian.Uint64(buf[:]), nil
	}
	return 0, fmt.Errorf("sysctl %s: unexpected %d-byte value", name, n)
}

func probe() (Info, error) {
	if err := bind(); err != nil {
		return Info{}, err
	}
	memsize, err := sysctlUint("hw.memsize")
	if err != nil {
		return Info{}, err
	}
	// Intel Macs have no iogpu sysctl: no wired limit applies to their GPUs
	// in the same way, so the default formula stands in.
	wiredMB, _ := sysctlUint("iogpu.wired_limit_mb")

	var page uintptr
	if rc := sys.hostPageSize(sys.host, &page); rc != 0 || page == 0 {
		p, err := sysctlUint("hw.pagesize")
		if err != nil {
			return Info{}, fmt.Errorf("page size: host_page_size failed (%d): %w", rc, err)
		}
		page = uintptr(p)
	}
	var buf [vmStats64Bytes]byte
	count := uint32(vmStats64Bytes / 4)
	if rc := sys.hostStatistics64(sys.host, hostVMInfo64, unsafe.Pointer(&buf[0]), &count); rc != 0 {
		return Info{}, fmt.Errorf("host_statistics64(HOST_VM_INFO64) failed (%d)", rc)
	}
	vm, err := decodeVMStats(buf[:count*4])
	if err != nil {
		return Info{}, err
	}
	return macInfo(memsize, wiredMB, uint64(page), vm), nil
}
