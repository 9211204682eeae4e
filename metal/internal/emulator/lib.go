//go:build linux

package emulator

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// abi is the runtime's C API version (EMU_ABI in rt/runtime.cpp).
const abi = 1

const (
	maxConstants = 64
	errBytes     = 4096
)

// desc mirrors emu_desc in rt/runtime.cpp: all fields uint64, so the
// layouts agree without padding rules (checked against emu_desc_size).
type desc struct {
	kernel, order, workers, _ uint64 // _: emu_desc.reserved
	groups, threads           [3]uint64
	bufBound                  uint64
	bufPtr, bufLen, tgLen     [31]uint64
	nconst                    uint64
	constIndex                [maxConstants]uint64
	constBits                 [maxConstants][2]uint64
}

// clib is a loaded emulator library: its C API as Go functions.
type clib struct {
	path             string
	abi              func() int32
	descSize         func() uint64
	kernelCount      func() int32
	kernelName       func(int32) string
	kernelFile       func(int32) string
	kernelLine       func(int32) int32
	kernelMaxThreads func(int32) int32
	constantCount    func() int32
	constantName     func(int32) string
	constantIndex    func(int32) int32
	constantSize     func(int32) int32
	constantType     func(int32) string
	dispatch         func(*desc, *byte, uint64) int32
}

var (
	libsMu sync.Mutex
	libs   = map[string]*clib{} // by path: a library is loaded once and never unloaded (its worker threads live on)
)

func load(path string) (*clib, error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if l, ok := libs[path]; ok {
		return l, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	l := &clib{path: path}
	syms := []struct {
		fn   any
		name string
	}{
		{&l.abi, "emu_abi"},
		{&l.descSize, "emu_desc_size"},
		{&l.kernelCount, "emu_kernel_count"},
		{&l.kernelName, "emu_kernel_name"},
		{&l.kernelFile, "emu_kernel_file"},
		{&l.kernelLine, "emu_kernel_line"},
		{&l.kernelMaxThreads, "emu_kernel_max_threads"},
		{&l.constantCount, "emu_constant_count"},
		{&l.constantName, "emu_constant_name"},
		{&l.constantIndex, "emu_constant_index"},
		{&l.constantSize, "emu_constant_size"},
		{&l.constantType, "emu_constant_type"},
		{&l.dispatch, "emu_dispatch"},
	}
	for _, s := range syms {
		if _, err := purego.Dlsym(h, s.name); err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		purego.RegisterLibFunc(s.fn, h, s.name)
	}
	if v := l.abi(); v != abi {
		return nil, fmt.Errorf("load %s: runtime ABI %d, want %d", path, v, abi)
	}
	if n := l.descSize(); n != uint64(unsafe.Sizeof(desc{})) {
		return nil, fmt.Errorf("load %s: dispatch description of %d bytes, Go has %d", path, n, unsafe.Sizeof(desc{}))
	}
	libs[path] = l
	return l, nil
}

// run dispatches; the error is the runtime's message (with the .metal line
// where it has one).
func (l *clib) run(d *desc) error {
	buf := make([]byte, errBytes)
	if l.dispatch(d, &buf[0], uint64(len(buf))) == 0 {
		return nil
	}
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return fmt.Errorf("%s", buf[:n])
}
