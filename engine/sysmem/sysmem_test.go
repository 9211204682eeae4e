package sysmem

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const gib = 1 << 30

const meminfoFixture = `MemTotal:       24684096 kB
MemFree:        20040152 kB
MemAvailable:   22282132 kB
Buffers:          102400 kB
Cached:          1000000 kB
SwapTotal:             0 kB
HugePages_Total:       0
`

func TestParseMeminfo(t *testing.T) {
	total, avail, err := parseMeminfo(strings.NewReader(meminfoFixture))
	if err != nil {
		t.Fatal(err)
	}
	if total != 24684096<<10 || avail != 22282132<<10 {
		t.Fatalf("total %d avail %d", total, avail)
	}
	// Pre-3.14 kernels: no MemAvailable, fall back to free + buffers + cached.
	old := strings.Replace(meminfoFixture, "MemAvailable:   22282132 kB\n", "", 1)
	_, avail, err = parseMeminfo(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(20040152+102400+1000000) << 10; avail != want {
		t.Fatalf("fallback avail %d, want %d", avail, want)
	}
	if _, _, err := parseMeminfo(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Fatal("meminfo without MemTotal accepted")
	}
	if _, _, err := parseMeminfo(strings.NewReader("MemTotal: lots kB\n")); err == nil || !strings.Contains(err.Error(), "MemTotal") {
		t.Fatalf("bad number: %v", err)
	}
}

func TestCgroupPath(t *testing.T) {
	v1 := "9:name=systemd:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/\n"
	if p, ok := cgroupPath(v1, ""); !ok || p != "/" {
		t.Fatalf("v2 entry %q %v", p, ok)
	}
	if p, ok := cgroupPath(v1, "memory"); !ok || p != "/process_api/abc" {
		t.Fatalf("v1 memory %q %v", p, ok)
	}
	if p, ok := cgroupPath(v1, "cpuacct"); !ok || p != "/x" {
		t.Fatalf("v1 cpuacct %q %v", p, ok)
	}
	if _, ok := cgroupPath("4:memory:/a\n", ""); ok {
		t.Fatal("found a v2 entry in a v1-only file")
	}
}

func TestParseCgroupMax(t *testing.T) {
	for s, want := range map[string]uint64{"max\n": 0, "": 0, "1073741824\n": gib, "9223372036854771712\n": 0, "junk": 0} {
		got, ok := parseCgroupMax(s)
		if got != want || ok != (want != 0) {
			t.Errorf("parseCgroupMax(%q) = %d, %v", s, got, ok)
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProbeLinuxCgroupV2(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	writeFiles(t, proc, map[string]string{
		"meminfo":     meminfoFixture,
		"self/cgroup": "0::/user.slice/app.scope\n",
	})
	writeFiles(t, cg, map[string]string{
		// The leaf has a loose limit, its parent the tight one.
		"user.slice/app.scope/memory.max":     "max\n",
		"user.slice/app.scope/memory.current": "100\n",
		"user.slice/memory.max":               "8589934592\n",
		"user.slice/memory.current":           "3221225472\n",
		"user.slice/memory.stat":              "anon 2147483648\nfile 1073741824\ninactive_file 1073741824\nactive_file 0\n",
		"memory.max":                          "17179869184\n",
		"memory.current":                      "0\n",
	})
	info, err := probeLinux(proc, cg)
	if err != nil {
		t.Fatal(err)
	}
	info.OS = "linux"
	if info.CgroupLimit != 8*gib || info.CgroupUsage != 2*gib {
		t.Fatalf("cgroup limit %d usage %d, want 8 GiB and 2 GiB (3 GiB minus 1 GiB inactive file)", info.CgroupLimit, info.CgroupUsage)
	}
	if b := info.Budget(); b != 6*gib {
		t.Fatalf("budget %d, want 6 GiB (cgroup room below MemAvailable)", b)
	}
}

func TestProbeLinuxCgroupV1AndNone(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	writeFiles(t, proc, map[string]string{
		"meminfo":     meminfoFixture,
		"self/cgroup": "4:memory:/docker/abc\n0::/\n",
	})
	// The container sees its own cgroup at the mount root; the printed path
	// does not exist under it.
	writeFiles(t, cg, map[string]string{
		"memory/memory.limit_in_bytes": "4294967296\n",
		"memory/memory.usage_in_bytes": "1073741824\n",
		"memory/memory.stat":           "total_inactive_file 536870912\n",
	})
	info, err := probeLinux(proc, cg)
	if err != nil {
		t.Fatal(err)
	}
	info.OS = "linux"
	if info.CgroupLimit != 4*gib || info.Budget() != 4*gib-gib/2 {
		t.Fatalf("v1: limit %d budget %d", info.CgroupLimit, info.Budget())
	}

	// No cgroup file at all: MemAvailable alone.
	proc2 := t.TempDir()
	writeFiles(t, proc2, map[string]string{"meminfo": meminfoFixture})
	info, err = probeLinux(proc2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	info.OS = "linux"
	if info.CgroupLimit != 0 || info.Budget() != 22282132<<10 {
		t.Fatalf("no cgroup: %+v budget %d", info, info.Budget())
	}
	if _, err := probeLinux(t.TempDir(), t.TempDir()); err == nil {
		t.Fatal("missing meminfo accepted")
	}
}

func TestDefaultWiredLimit(t *testing.T) {
	for _, c := range []struct{ ram, want uint64 }{
		{16 * gib, 16 * gib / 3 * 2},
		{32 * gib, 32 * gib / 3 * 2}, // 21845.33 MiB, as Metal reports on a 32 GB M1 Max
		{36 * gib, 24 * gib},
		{64 * gib, 48 * gib},
		{128 * gib, 96 * gib},
	} {
		if got := DefaultWiredLimit(c.ram); got != c.want {
			t.Errorf("DefaultWiredLimit(%d GiB) = %d, want %d", c.ram/gib, got, c.want)
		}
	}
	if m := MaxWiredLimit(64 * gib); m != 56*gib {
		t.Errorf("MaxWiredLimit(64 GiB) = %d GiB", m/gib)
	}
	if m := MaxWiredLimit(16 * gib); m != 12*gib {
		t.Errorf("MaxWiredLimit(16 GiB) = %d GiB", m/gib)
	}
}

func vmFixture(free, active, inactive, wired, purgeable, speculative uint32) []byte {
	b := make([]byte, vmStats64Bytes)
	binary.LittleEndian.PutUint32(b[0:], free)
	binary.LittleEndian.PutUint32(b[4:], active)
	binary.LittleEndian.PutUint32(b[8:], inactive)
	binary.LittleEndian.PutUint32(b[12:], wired)
	for off := 16; off < 88; off += 8 {
		binary.LittleEndian.PutUint64(b[off:], 0xdeadbeef) // counters the budget ignores
	}
	binary.LittleEndian.PutUint32(b[88:], purgeable)
	binary.LittleEndian.PutUint32(b[92:], speculative)
	return b
}

func TestMacBudget(t *testing.T) {
	const page = 16384
	// 64 GiB Mac: 30 GiB free (incl. speculative), 10 GiB inactive, 1 GiB purgeable.
	vm, err := decodeVMStats(vmFixture(30*gib/page, 20*gib/page, 10*gib/page, 3*gib/page, gib/page, gib/page))
	if err != nil {
		t.Fatal(err)
	}
	if vm.speculative != gib/page || vm.purgeable != gib/page {
		t.Fatalf("decoded %+v", vm)
	}
	info := macInfo(64*gib, 0, page, vm)
	if info.AvailableRAM != 41*gib {
		t.Fatalf("available %d GiB, want 41 (free + inactive + purgeable)", info.AvailableRAM/gib)
	}
	if info.WiredLimit != 48*gib || info.Budget() != 41*gib {
		t.Fatalf("wired %d budget %d: RAM in use by others should bind", info.WiredLimit, info.Budget())
	}
	// Idle machine: the default wired limit binds.
	idle := macInfo(64*gib, 0, page, vmStats{free: 60 * gib / page})
	if idle.Budget() != 48*gib {
		t.Fatalf("idle budget %d GiB, want 48 (3/4 of 64)", idle.Budget()/gib)
	}
	// A raised limit replaces the default and Metal's figure.
	raised := macInfo(64*gib, 57344, page, vmStats{free: 60 * gib / page})
	raised.GPUWorkingSet = 48 * gib
	if raised.GPUCap() != 56*gib || raised.Budget() != 56*gib {
		t.Fatalf("raised: cap %d budget %d", raised.GPUCap(), raised.Budget())
	}
	// Metal's working set, when reported, replaces the formula.
	metal := macInfo(128*gib, 0, page, vmStats{free: 120 * gib / page})
	metal.GPUWorkingSet = 115448725504 // 107.52 GiB
	if metal.Budget() != 115448725504 {
		t.Fatalf("metal working set budget %d", metal.Budget())
	}
	if _, err := decodeVMStats(make([]byte, 40)); err == nil {
		t.Fatal("short vm_statistics64 accepted")
	}
}

func TestProbeThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no probe on " + runtime.GOOS)
	}
	info, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRAM == 0 || info.AvailableRAM == 0 || info.AvailableRAM > info.TotalRAM || info.Budget() == 0 || info.Budget() > info.TotalRAM {
		t.Fatalf("implausible: %+v budget %d", info, info.Budget())
	}
	t.Logf("%+v budget %.2f GiB", info, float64(info.Budget())/gib)
}

func TestGPUProbeHook(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no probe on " + runtime.GOOS)
	}
	defer func(old func() (uint64, uint64, bool)) { GPUProbe = old }(GPUProbe)
	GPUProbe = func() (uint64, uint64, bool) { return 5 * gib, gib, true }
	info, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if info.GPUWorkingSet != 5*gib || info.GPUAllocated != gib {
		t.Fatalf("hook not applied: %+v", info)
	}
}
