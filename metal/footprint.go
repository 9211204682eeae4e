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

// ReadsKVResidual (backend.ResidualReader): sessions on Metal give a
// quantized cache its default residual window, whose ring cfg.Bytes()
// already counts.
func (footprint) ReadsKVResidual() bool { return true }

// The footprint (like the backend) is no kv.RingReader: the Metal kernels
// do not read sliding-window rings yet, so NewKVCache allocates a local
// layer's planes for the whole context and the estimator counts them so.

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
