package estimate

import "nibble/engine/kv"

// maxCtxSearch bounds the search; contexts beyond 2^28 tokens are not
// meaningful for any model this engine runs.
const maxCtxSearch = 1 << 28

// MaxContext is the largest context for which d under o (o.Ctx ignored)
// fits in budget bytes; 0 when not even one token fits. Total memory never
// decreases with the context (the KV cache is linear in it, the activations
// follow min(batch, ctx) and the attention workspace its split count), so
// a bisection finds the exact boundary. It is a memory bound only and may exceed the trained
// context; advice that proposes it says so (ctxFlag).
func MaxContext(d Desc, o Options, budget int64) int {
	fits := func(ctx int) bool {
		o.Ctx = ctx
		e, err := Compute(d, o)
		return err == nil && e.Total <= budget
	}
	if budget <= 0 || !fits(1) {
		return 0
	}
	// Upper bound from the linear KV term alone: at hi the cache by itself
	// exceeds what is left after the weights. Only layers without a
	// sliding-window ring grow with the context.
	cfg := KVConfig(d.HParams, o)
	var perToken int64
	for l := range cfg.Layers {
		if l >= len(cfg.LayerWindow) || cfg.LayerWindow[l] == 0 {
			perToken += int64(cfg.KVHeadsOf(l)) * 2 * int64(kv.BytesPerTokenHead(cfg.Type, cfg.HeadDimOf(l), cfg.GroupSize))
		}
	}
	hi := maxCtxSearch
	if perToken > 0 {
		if n := (budget-d.WeightsBytes)/perToken + 1; n < int64(hi) {
			hi = int(max(n, 2))
		}
	}
	if fits(hi) {
		return hi
	}
	lo := 1 // fits(lo) && !fits(hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
