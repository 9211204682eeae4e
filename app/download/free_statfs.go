//go:build darwin || linux

package download

import (
	"errors"
	"fmt"
	"syscall"
)

// freeSpace is the space an unprivileged user may fill in dir (f_bavail;
// on APFS it leaves out purgeable space, so it errs on the safe side).
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := uint64(st.Bavail) * uint64(st.Bsize)
	return int64(min(free, 1<<62)), nil
}

// isDiskFull tells a full disk or an exhausted quota from other write
// errors.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
