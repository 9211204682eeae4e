//go:build linux

package sysmem

func probe() (Info, error) { return probeLinux("/proc", "/sys/fs/cgroup") }
