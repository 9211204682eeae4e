//go:build !linux && !darwin

package sysmem

import (
	"fmt"
	"runtime"
)

func probe() (Info, error) {
	return Info{}, fmt.Errorf("memory probe not implemented on %s", runtime.GOOS)
}
