package estimate

import (
	"math"

	"nibble/engine/attention"
	"nibble/engine/kv"
	"nibble/engine/model"
)

// scratchBytes is what a session allocates besides the cache: the forward
// pass's activation tensors for batch rows (model.ActivationBytes, which
// lists exactly the tensors State allocates, logits included) and the
// attention workspace the backend allocates with the cache
// (attention.WorkspaceBytes: split-K partials, prefill K/V staging,
// per-thread slots). Both grow with the batch; the workspace also grows with
// ctx through its split count.
func scratchBytes(hp model.HParams, cfg kv.Config, batch, threads int) int64 {
	p := attention.Params{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(hp.HeadDim))), Window: hp.Window}
	return model.ActivationBytes(hp, batch) + attention.WorkspaceBytes(p, cfg.Ctx, batch, threads)
}
