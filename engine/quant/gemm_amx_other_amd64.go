//go:build amd64 && !linux

package quant

// enableAMX: the AMX kernel is only wired up where Linux grants the tile
// state (gemm_amx_linux_amd64.go).
func enableAMX() bool { return false }
