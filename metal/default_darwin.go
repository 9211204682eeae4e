//go:build darwin

package metal

import (
	"nibble/metal/device"
	"nibble/metal/mtl"
)

// openDefault opens the darwin device layer's system default GPU.
func openDefault() (device.Device, string, error) {
	dev, err := mtl.Open()
	if err != nil {
		return nil, "", err
	}
	return dev, dev.Name() + ", " + dev.Residency(), nil
}
