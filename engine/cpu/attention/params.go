// Package attention holds the CPU backend's attention kernels, the reference
// the Metal kernels are tested against (docs/ARCHITECTURE.md, "Decode attention" and
// "Prefill"): decode attention as a two-pass split-K over a K/V cache
// read once per GQA group, in blocks of 32 tokens with one online-softmax
// rescale per block in the exp2 domain, the q4/q8 scores computed on packed
// codes with the qdot identity and V accumulated from codes; and a hybrid
// causal prefill (cached prefix from the cache, new rows in f16 precision).
package attention

import (
	"fmt"
	"math"

	"nibble/engine/fastmath"
	"nibble/engine/kv"
)

// Params is the attention of one layer: its geometry (Heads, KVHeads,
// HeadDim), which a Workspace is made for, and its Scale and Window, which
// every call passes anew, so layers of one model may differ in them (sliding
// window layers beside full ones).
type Params struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // applied to q·k, usually 1/sqrt(HeadDim)
	Window                  int     // sliding window in tokens (the query's own included); 0 = none
	Softcap                 float32 // scores s become Softcap·tanh(s/Softcap) before the softmax; 0 = none
	// Sinks, when set, holds one learned logit per query head (gpt-oss's
	// attention sinks): head h's softmax denominator gains exp(Sinks[h] −
	// max), max taken over the scores and the sink, as a key with that
	// score and a zero value would add. nil = none.
	Sinks []float32
}

const (
	blockTokens     = 32  // tokens per online-softmax update
	minChunk        = 256 // fewest tokens a split owns
	splitsPerThread = 4   // most splits per worker thread (load balance vs merge work)
	log2e           = 1.4426950408889634
	maxHeads        = 1 << 12 // sanity bound on untrusted head counts
	maxHeadDim      = 1 << 12
)

// group is G, the query heads sharing one kv head.
func (p Params) group() int { return p.Heads / p.KVHeads }

func (p Params) validate() error {
	switch {
	case p.Heads <= 0 || p.KVHeads <= 0 || p.Heads > maxHeads:
		return fmt.Errorf("attention: heads %d and kv heads %d must be positive (at most %d)", p.Heads, p.KVHeads, maxHeads)
	case p.Heads%p.KVHeads != 0:
		return fmt.Errorf("attention: heads %d not a multiple of kv heads %d", p.Heads, p.KVHeads)
	case p.HeadDim <= 0 || p.HeadDim%8 != 0 || p.HeadDim > maxHeadDim:
		return fmt.Errorf("attention: head dim %d must be a positive multiple of 8 (at most %d)", p.HeadDim, maxHeadDim)
	case p.Window < 0:
		return fmt.Errorf("attention: negative window %d", p.Window)
	case !(p.Softcap >= 0) || math.IsInf(float64(p.Softcap), 0):
		return fmt.Errorf("attention: soft-cap %g must be finite and ≥ 0", p.Softcap)
	case p.Sinks != nil && len(p.Sinks) != p.Heads:
		return fmt.Errorf("attention: %d sinks for %d heads", len(p.Sinks), p.Heads)
	}
	for h, s := range p.Sinks {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("attention: sink of head %d is %g", h, s)
		}
	}
	return nil
}

// sinkLog2 is head h's sink in the kernels' log2 domain, or −Inf (no sink).
func (p Params) sinkLog2(h int) float32 {
	if p.Sinks == nil {
		return negInf
	}
	return p.Sinks[h] * log2e
}

// addSink folds a sink logit (log2 domain) into one head's online-softmax
// state: the max becomes max(m, sink), the accumulator and sum are rescaled
// to it, and the sum gains 2^(sink − max); the sink's value is zero.
func addSink(o []float32, ml []float32, sink float32) {
	if sink == negInf {
		return
	}
	m := max(ml[0], sink)
	alpha := fastmath.Exp2(ml[0] - m)
	ml[0], ml[1] = m, ml[1]*alpha+fastmath.Exp2(sink-m)
	if alpha != 1 {
		for i := range o {
			o[i] *= alpha
		}
	}
}

// checkScale reports a scale no softmax can use.
func (p Params) checkScale() error {
	if !(p.Scale > 0) || math.IsInf(float64(p.Scale), 0) {
		return fmt.Errorf("attention: scale %g must be positive and finite", p.Scale)
	}
	return nil
}

// checkCache reports a cache layer that does not match p.
func (p Params) checkCache(c *kv.Cache, layer int) error {
	if c == nil {
		return fmt.Errorf("attention: nil cache")
	}
	cfg := c.Config()
	switch {
	case layer < 0 || layer >= cfg.Layers:
		return fmt.Errorf("attention: layer %d outside [0, %d)", layer, cfg.Layers)
	case cfg.KVHeadsOf(layer) != p.KVHeads || cfg.HeadDimOf(layer) != p.HeadDim:
		return fmt.Errorf("attention: layer %d of the cache has %d kv heads of dim %d, params want %d of dim %d",
			layer, cfg.KVHeadsOf(layer), cfg.HeadDimOf(layer), p.KVHeads, p.HeadDim)
	}
	return nil
}

// visible is the first key position a query at position pos sees.
func (p Params) visible(pos int) int {
	if p.Window > 0 {
		return max(0, pos+1-p.Window)
	}
	return 0
}

// checkRing reports a read of cached positions [lo, hi) that a
// sliding-window layer's ring cannot serve: attention that sees further
// back than the ring keeps, or positions it no longer holds.
func checkRing(lv *kv.LayerView, p Params, lo, hi int) error {
	if lv.Ring == 0 {
		return nil
	}
	if p.Window == 0 || p.Window > lv.Ring {
		return fmt.Errorf("layer keeps a ring of %d positions; attention with window %d (0: none) needs more", lv.Ring, p.Window)
	}
	return lv.CheckRead(lo, hi)
}
