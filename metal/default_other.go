//go:build !darwin

package metal

import (
	"fmt"
	"runtime"

	"nibble/metal/device"
	"nibble/metal/mtl"
)

// openDefault: Metal exists on macOS only.
func openDefault() (device.Device, string, error) {
	return nil, "", fmt.Errorf("%w (this is %s; the MSL emulator runs the kernels in tests only)", mtl.ErrUnsupported, runtime.GOOS)
}
