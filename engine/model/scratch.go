package model

import (
	"nibble/engine/family"
	"nibble/engine/kv"
)

// activations lists the float32 tensors one forward pass allocates for a
// batch of up to `batch` rows. The forward pass allocates exactly these (see
// Model.NewState in state.go) and the memory estimator sums them, so both
// use this table.
func activations(hp HParams, batch int) []int {
	q, kv := hp.Heads*hp.MaxHeadDim(), hp.MaxKVHeads()*hp.MaxHeadDim()
	ff := hp.DenseFF()
	for _, v := range hp.LayerFF {
		ff = max(ff, v)
	}
	a := []int{
		batch * hp.Embd, // x: residual stream
		batch * hp.Embd, // h: normed input / projections out
		batch * q,       // q
		batch * kv,      // k
		batch * kv,      // v
		batch * q,       // attn: attention output
		batch * ff,      // gate
		batch * ff,      // up
		hp.Embd,         // last: final row, normed
		hp.Vocab,        // logits
	}
	if hp.MoE() {
		slots := batch * hp.ExpertsUsed
		a = append(a,
			batch*max(hp.Experts, 1), // router logits
			slots,                    // expert ids, one per slot (token × chosen expert)
			slots,                    // their weights
			slots,                    // ids doubled, for fused gate|up experts
			slots*hp.ExpertFF,        // experts' gate
			slots*hp.ExpertFF,        // experts' up
			slots*hp.Embd,            // experts' outputs
			batch*hp.Embd,            // the feed-forward's normed input
		)
	}
	if hp.MoE() && expertsOwnNorms(hp) {
		a = append(a, batch*hp.Embd) // Gemma 4: the router's input, then the experts' sum
	}
	if hp.PerLayerEmbd > 0 {
		all := batch * hp.Layers * hp.PerLayerEmbd
		a = append(a, all, all, // per-layer inputs of every layer, and the token part while they are made
			batch*hp.PerLayerEmbd, batch*hp.PerLayerEmbd) // one layer's input, and its gate
	}
	for _, src := range hp.KVShareSources() {
		// A prefill batch's K and V of a layer others read, kept until
		// they have attended (the cache stores them after).
		n := batch * hp.KVHeadsOf(src) * hp.HeadDimOf(src)
		a = append(a, n, n)
	}
	return a
}

// ActivationBytes is the size of the per-session activation tensors.
func ActivationBytes(hp HParams, batch int) int64 {
	var n int64
	for _, f := range activations(hp, batch) {
		n += 4 * int64(f)
	}
	return n
}

// DefaultBatch is the prefill batch when none is asked for.
const DefaultBatch = 512

// SessionSizes fills zero sizes the way a session is created: context
// min(trained, 4096), batch DefaultBatch, the batch never above the context,
// KV group kv.DefaultGroupSize. The session and the estimator both call it.
func SessionSizes(hp HParams, ctx, batch, group int) (int, int, int) {
	if ctx <= 0 {
		ctx = min(hp.CtxTrain, 4096)
	}
	if batch <= 0 {
		batch = DefaultBatch
	}
	if group <= 0 {
		group = kv.DefaultGroupSize
	}
	return ctx, min(batch, ctx), group
}

// expertsOwnNorms reports whether hp's family runs Gemma 4's experts
// (family.Layout.ExpertsOwnNorms).
func expertsOwnNorms(hp HParams) bool {
	f, _ := family.Lookup(hp.Arch)
	return f.Tensors.ExpertsOwnNorms
}
