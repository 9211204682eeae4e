package metal

import (
	"nibble/engine/backend"
	"nibble/engine/kv"
)

// footprint is the Metal backend's answer to the memory estimator.
type footprint struct{}

func init() { backend.RegisterFootprint("metal", footprint{}) }

// WorkspaceBytes is what NewKVCache allocates besides cfg.Bytes(): the λ
// buffers of a smoothing cache and the attention workspace. The GPU has no
// worker count: threads is ignored.
func (footprint) WorkspaceBytes(cfg kv.Config, heads, maxBatch, threads int) int64 {
	return workspaceBytes(cfg, heads, maxBatch)
}

// OverheadBytes is the CPU backend's ("cpu", registered by engine/cpu, which
// every program that chooses a backend links: app/backends): the Go runtime,
// the tokenizer and the host-side pools are the same process. What Metal
// adds besides (the driver, pipeline state objects, command buffers,
// staging uploads) is not measured and not counted; without the CPU
// footprint registered it is 0.
func (footprint) OverheadBytes(s backend.Shape, batch int) int64 {
	f, err := backend.FootprintOf("cpu")
	if err != nil {
		return 0
	}
	return f.OverheadBytes(s, batch)
}
