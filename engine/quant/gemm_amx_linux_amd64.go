package quant

import (
	"syscall"

	"golang.org/x/sys/cpu"
)

// enableAMX asks Linux for the AMX tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), which a process must do
// before its first tile instruction; false if the CPU or kernel says no.
func enableAMX() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 || !hasGemmAVX512() {
		return false
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
