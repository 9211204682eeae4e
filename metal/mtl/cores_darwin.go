//go:build darwin

package mtl

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"nibble/metal/device"
	"nibble/metal/traffic"
)

var _ device.Cores = (*Device)(nil)

const (
	ioKitPath          = "/System/Library/Frameworks/IOKit.framework/IOKit"
	coreFoundationPath = "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation"
	cfStringUTF8       = 0x08000100 // kCFStringEncodingUTF8
	cfNumberSInt32     = 3          // kCFNumberSInt32Type
)

var ioCores struct {
	once sync.Once
	n    int
}

// Cores is device.Cores: the GPU's cores as the IORegistry gives them (the
// AGXAccelerator service's gpu-core-count property: Metal has no query for
// it), or, where that is missing, those of the largest configuration of the
// chip Metal names (metal/traffic's table: M1 Max 32, though some have 24).
func (d *Device) Cores() int {
	ioCores.once.Do(func() { ioCores.n = ioGPUCores() })
	if ioCores.n > 0 {
		return ioCores.n
	}
	return traffic.CoresByName(d.name)
}

// ioGPUCores reads gpu-core-count of the first AGXAccelerator service; 0
// when IOKit, the service or the property is not there.
func ioGPUCores() int {
	iokit, err := purego.Dlopen(ioKitPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0
	}
	cf, err := purego.Dlopen(coreFoundationPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0
	}
	var (
		serviceMatching    func(name string) uintptr
		getMatchingService func(mainPort uint32, matching uintptr) uint32
		createCFProperty   func(entry uint32, key, allocator uintptr, options uint32) uintptr
		objectRelease      func(object uint32) int32
		stringCreate       func(allocator uintptr, s string, encoding uint32) uintptr
		getTypeID          func(ref uintptr) uintptr
		numberGetTypeID    func() uintptr
		numberGetValue     func(number uintptr, typ int, out unsafe.Pointer) bool
		release            func(ref uintptr)
	)
	for _, f := range []struct {
		lib  uintptr
		name string
		fn   any
	}{
		{iokit, "IOServiceMatching", &serviceMatching}, {iokit, "IOServiceGetMatchingService", &getMatchingService},
		{iokit, "IORegistryEntryCreateCFProperty", &createCFProperty}, {iokit, "IOObjectRelease", &objectRelease},
		{cf, "CFStringCreateWithCString", &stringCreate}, {cf, "CFGetTypeID", &getTypeID},
		{cf, "CFNumberGetTypeID", &numberGetTypeID}, {cf, "CFNumberGetValue", &numberGetValue}, {cf, "CFRelease", &release},
	} {
		sym, err := purego.Dlsym(f.lib, f.name)
		if err != nil {
			return 0
		}
		purego.RegisterFunc(f.fn, sym)
	}
	matching := serviceMatching("AGXAccelerator") // consumed by IOServiceGetMatchingService
	if matching == 0 {
		return 0
	}
	service := getMatchingService(0, matching) // kIOMainPortDefault
	if service == 0 {
		return 0
	}
	defer objectRelease(service)
	key := stringCreate(0, "gpu-core-count", cfStringUTF8)
	if key == 0 {
		return 0
	}
	defer release(key)
	v := createCFProperty(service, key, 0, 0)
	if v == 0 {
		return 0
	}
	defer release(v)
	var n int32
	if getTypeID(v) != numberGetTypeID() || !numberGetValue(v, cfNumberSInt32, unsafe.Pointer(&n)) {
		return 0
	}
	return int(n)
}
