package estimate

import (
	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/engine/model"
)

// scratchBytes is what a session allocates besides the cache: the forward
// pass's activation tensors for batch rows (model.ActivationBytes, which
// lists exactly the tensors State allocates, logits included) and the
// attention workspace the backend allocates with the cache (its
// footprint's WorkspaceBytes: on the CPU split-K partials, prefill K/V
// staging, per-thread slots). Both grow with the batch; the CPU's workspace
// also grows with ctx through its split count.
func scratchBytes(f backend.Footprint, hp model.HParams, cfg kv.Config, batch, threads int) int64 {
	return model.ActivationBytes(hp, batch) + f.WorkspaceBytes(cfg, hp.Heads, batch, threads)
}
