package model

// activations lists the float32 tensors one forward pass allocates for a
// batch of up to `batch` rows. The forward pass allocates exactly these (see
// newScratch) and the memory estimator sums them, so both use this table.
func activations(hp HParams, batch int) []int {
	return []int{
		batch * hp.Embd,    // x: residual stream
		batch * hp.Embd,    // h: normed input / projections out
		batch * hp.QDim(),  // q
		batch * hp.KVDim(), // k
		batch * hp.KVDim(), // v
		batch * hp.QDim(),  // attn: attention output
		batch * hp.FF,      // gate
		batch * hp.FF,      // up
		hp.Embd,            // last: final row, normed
		hp.Vocab,           // logits
	}
}

// ActivationBytes is the size of the per-session activation tensors.
func ActivationBytes(hp HParams, batch int) int64 {
	var n int64
	for _, f := range activations(hp, batch) {
		n += 4 * int64(f)
	}
	return n
}
