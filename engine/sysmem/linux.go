package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// probeLinux reads /proc/meminfo and the process's cgroup memory limit
// (v2, else v1). The
// roots are parameters so tests can point them at fixture trees.
func probeLinux(procRoot, cgroupRoot string) (Info, error) {
	mi, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return Info{}, err
	}
	var info Info
	if info.TotalRAM, info.AvailableRAM, err = parseMeminfo(bytes.NewReader(mi)); err != nil {
		return Info{}, fmt.Errorf("%s: %w", filepath.Join(procRoot, "meminfo"), err)
	}
	// cgroup v1 or no cgroup at all is not an error: there is simply no limit.
	cg, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return info, nil
	}
	if dir, ok := cgroupPath(string(cg), ""); ok {
		info.CgroupLimit, info.CgroupUsage = tightestCgroup(cgroupRoot, dir, cgroupV2)
	}
	if dir, ok := cgroupPath(string(cg), "memory"); ok && info.CgroupLimit == 0 {
		info.CgroupLimit, info.CgroupUsage = tightestCgroup(filepath.Join(cgroupRoot, "memory"), dir, cgroupV1)
	}
	return info, nil
}

// parseMeminfo returns MemTotal and MemAvailable in bytes. Kernels before
// 3.14 lack MemAvailable; then MemFree + Buffers + Cached approximates it.
func parseMeminfo(r io.Reader) (total, avail uint64, err error) {
	vals := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("meminfo %s: %q is not a number", name, f[0])
		}
		if len(f) > 1 && f[1] == "kB" {
			v <<= 10
		}
		vals[name] = v
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	total, ok := vals["MemTotal"]
	if !ok {
		return 0, 0, fmt.Errorf("meminfo has no MemTotal")
	}
	avail, ok = vals["MemAvailable"]
	if !ok {
		avail = vals["MemFree"] + vals["Buffers"] + vals["Cached"]
	}
	return total, avail, nil
}

// cgroupFiles names the limit, usage and reclaimable-cache entries of one
// cgroup version.
type cgroupFiles struct{ max, current, inactiveFile string }

var (
	cgroupV2 = cgroupFiles{"memory.max", "memory.current", "inactive_file"}
	cgroupV1 = cgroupFiles{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"}
)

// cgroupPath finds this process's cgroup in /proc/self/cgroup: the unified
// (v2) entry "0::/path" when controller is "", else the v1 line listing
// the controller ("4:memory:/path").
func cgroupPath(s, controller string) (string, bool) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		match := f[0] == "0" && f[1] == ""
		if controller != "" {
			match = slices.Contains(strings.Split(f[1], ","), controller)
		}
		if match {
			p := strings.TrimSpace(f[2])
			if p == "" {
				p = "/"
			}
			return p, true
		}
	}
	return "", false
}

// tightestCgroup walks from the process's cgroup up to the root of the
// mount (limits on ancestors apply too; in a container the path printed in
// /proc/self/cgroup may not exist under its own mount, whose root is then the
// container's cgroup) and returns the limit and usage of the level with
// the least room left; 0, 0 when no level has a limit.
func tightestCgroup(root, dir string, names cgroupFiles) (limit, usage uint64) {
	for d := dir; ; d = filepath.Dir(d) {
		full := filepath.Join(root, d)
		if l, ok := readCgroupMax(filepath.Join(full, names.max)); ok {
			u := min(cgroupUsage(full, names), l)
			if limit == 0 || l-u < limit-usage {
				limit, usage = l, u
			}
		}
		if d == "/" || d == "." {
			return limit, usage
		}
	}
}

// readCgroupMax reads a limit file: a byte count, "max" (v2) or a value
// near 2^63 (v1) for no limit.
func readCgroupMax(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseCgroupMax(string(b))
}

func parseCgroupMax(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "max" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}

// cgroupUsage is the current usage minus the inactive page cache, which the
// kernel reclaims before it enforces the limit.
func cgroupUsage(dir string, names cgroupFiles) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, names.current))
	if err != nil {
		return 0
	}
	cur, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	st, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return cur
	}
	return cur - min(cur, statField(string(st), names.inactiveFile))
}

func statField(stat, name string) uint64 {
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			return v
		}
	}
	return 0
}
