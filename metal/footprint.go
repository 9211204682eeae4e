package metal

import (
	"nibble/engine/backend"
	_ "nibble/engine/cpu" // registers the CPU footprint, whose overhead the Metal one borrows
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

// OverheadBytes is the CPU backend's for now: the Go runtime, the tokenizer
// and the host-side pools are the same process. What Metal adds (the
// driver, pipeline state objects, command buffers, staging uploads) is to be
// measured on a Mac in part 2 of the Metal backend.
func (footprint) OverheadBytes(s backend.Shape, batch int) int64 {
	f, err := backend.FootprintOf("cpu")
	if err != nil {
		return 0
	}
	return f.OverheadBytes(s, batch)
}
