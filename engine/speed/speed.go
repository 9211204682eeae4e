// Package speed estimates a model's decode speed before it is loaded. A
// decode step is bound by memory: it reads every layer's weights, the
// output matrix and the KV cache once per token, so tokens per second is
// the rate those bytes move at divided into them. On the CPU the rate is
// measured (Probe: the CPU backend's own mat-vec on a matrix too big for
// the caches); a GPU's rate is its published bandwidth, applied by the
// caller (app/backends, with metal/traffic's byte count).
package speed

import (
	"fmt"
	"math"
	"strings"

	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
)

// PerToken is what one decode step reads from memory.
type PerToken struct {
	// Weights: every layer's matrices and the output matrix (the
	// embedding table gives one row); of a mixture of experts' expert
	// matrices only the share a token is routed to.
	Weights int64
	// KV is the cache read by attention at the context asked for.
	KV int64
	// Positions are the cached positions attention reads, summed over
	// the layers (a sliding-window layer reads its window at most).
	Positions int
	// HeadDimPositions is the same sum weighted by each layer's head dim:
	// the attention's arithmetic per query head (Gemma 4's global layers
	// have wider heads than its sliding ones).
	HeadDimPositions int64
	// Type is the weights' dominant type: the file type's, else the type
	// whose size per element is closest to the file's average.
	Type ggml.Type
}

// Bytes is the whole step.
func (p PerToken) Bytes() int64 { return p.Weights + p.KV }

// Read is what a decode step of d reads at position ctx-1 with a cache of
// type t (group: the q4/q8 group size, 0 for 32).
func Read(d estimate.Desc, ctx int, t kv.Type, group int) (PerToken, error) {
	hp := d.HParams
	if hp.Layers <= 0 || hp.Embd <= 0 || hp.Heads <= 0 || hp.FF <= 0 || hp.Vocab <= 0 || d.WeightsBytes <= 0 {
		return PerToken{}, fmt.Errorf("speed: %s: the header lacks the shape (layers %d, embd %d, heads %d, ff %d, vocab %d, %d weight bytes)",
			d.Name, hp.Layers, hp.Embd, hp.Heads, hp.FF, hp.Vocab, d.WeightsBytes)
	}
	hd, kvh := hp.HeadDim, hp.KVHeads
	if hd <= 0 {
		hd = hp.Embd / hp.Heads
	}
	if kvh <= 0 {
		kvh = hp.Heads
	}
	if group <= 0 {
		group = 32
	}
	embd, q, kvd := int64(hp.Embd), int64(hp.Heads*hd), int64(kvh*hd)
	layer := embd*q + 2*embd*kvd + q*embd + 3*embd*int64(hp.FF)
	table := int64(hp.Vocab) * embd
	stored := int64(hp.Layers)*layer + table
	if !hp.TiedOutput {
		stored += table
	}
	perElem := float64(d.WeightsBytes) / float64(stored)
	// The output matrix is read whole whether it is tied to the table or not.
	read := float64(int64(hp.Layers)*layer+table) * perElem
	if d.Experts.Count > 0 && d.ActiveBytes > 0 {
		// The shape's dense layer does not describe a mixture of experts;
		// the estimator counted what a token reads, tensor by tensor (or
		// from the catalog's active parameters).
		read = float64(d.ActiveBytes)
	}
	var kvRead, hdPositions int64
	var positions int
	for il := 0; il < hp.Layers; il++ {
		n := ctx
		if hp.SlidingLayer(il) {
			n = min(n, hp.Window)
		}
		// Each layer's own head shape (Gemma 4); a layer that shares K/V
		// still reads its source's cache.
		lhd, lkvh := hd, kvh
		if hp.HeadDimLocal > 0 || hp.LayerKVHeads != nil {
			lhd, lkvh = hp.HeadDimOf(il), hp.KVHeadsOf(il)
		}
		kvRead += int64(n) * 2 * int64(lkvh) * int64(kv.BytesPerTokenHead(t, lhd, group))
		positions += n
		hdPositions += int64(lhd) * int64(n)
	}
	return PerToken{Weights: int64(read), KV: kvRead, Positions: positions, HeadDimPositions: hdPositions, Type: dominantType(d.FileType, perElem)}, nil
}

// candidates are the weight types a file's average size per element is
// matched against when its file type names none of them.
var candidates = []ggml.Type{ggml.F32, ggml.F16, ggml.Q8_0, ggml.Q6_K, ggml.Q5_K, ggml.Q4_K, ggml.Q4_0, ggml.Q3_K, ggml.Q2_K}

// dominantType reads a file type name ("Q4_K_M" is Q4_K, "MOSTLY_Q8_0"
// Q8_0), else takes the candidate closest to perElem bytes per element.
func dominantType(fileType string, perElem float64) ggml.Type {
	name := strings.TrimPrefix(strings.ToUpper(fileType), "MOSTLY_")
	for name != "" {
		if t, err := ggml.ParseType(name); err == nil {
			return t
		}
		i := strings.LastIndexByte(name, '_')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	best, gap := ggml.Q4_0, math.Inf(1)
	for _, t := range candidates {
		size := float64(t.TypeSize()) / float64(t.BlockSize())
		if g := math.Abs(size - perElem); g < gap {
			best, gap = t, g
		}
	}
	return best
}

// TokensPerSecond is the decode rate when p's bytes move at rate bytes per
// second, plus a fixed cost per token in seconds (the small kernels and
// the dispatch between them).
func TokensPerSecond(p PerToken, rate, fixed float64) float64 {
	if rate <= 0 || p.Bytes() <= 0 {
		return 0
	}
	return 1 / (float64(p.Bytes())/rate + fixed)
}
