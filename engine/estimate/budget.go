package estimate

import (
	"runtime"

	"nibble/engine/sysmem"
)

// Budget is the memory a model may use, with the machine facts the advice
// needs to suggest raising the macOS wired limit.
type Budget struct {
	Bytes     int64
	Simulated bool   // --ram: exactly Bytes, no working-set or wired cap
	OS        string // darwin, linux, ...
	// From the probe (zero for a simulation).
	TotalRAM     int64
	AvailableRAM int64
	GPUCap       int64 // macOS: the GPU wired cap in force now
	WiredLimitMB int64 // macOS: iogpu.wired_limit_mb as set (0 = default)
}

// Simulated is a budget of exactly n bytes (another machine; Open-TQ-Metal's
// 64 GiB Mac example assumes all of it usable).
func Simulated(n int64) Budget { return Budget{Bytes: n, Simulated: true, OS: runtime.GOOS} }

// FromSystem is this machine's budget (sysmem.Info.Budget).
func FromSystem(info sysmem.Info) Budget {
	return Budget{
		Bytes: clampInt64(info.Budget()), OS: info.OS,
		TotalRAM: clampInt64(info.TotalRAM), AvailableRAM: clampInt64(info.AvailableRAM),
		GPUCap: clampInt64(info.GPUCap()), WiredLimitMB: clampInt64(info.WiredLimitMB),
	}
}

// SystemBudget probes this machine.
func SystemBudget() (Budget, error) {
	info, err := sysmem.Probe()
	if err != nil {
		return Budget{}, err
	}
	return FromSystem(info), nil
}

func clampInt64(v uint64) int64 { return int64(min(v, 1<<63-1)) }
