// Package backend is the small set of ops a model family's forward pass is
// written against (docs/ARCHITECTURE.md, "Backend contract"). The CPU backend
// executes each op at once; a GPU backend (Metal) encodes them into a
// command buffer and runs it at Sync.
package backend

import (
	"nibble/engine/ggml"
	"nibble/engine/kv"
)

// Tensor is a backend-owned buffer of float32 activations. It is opaque:
// only the backend that made it looks inside.
type Tensor any

// WeightDesc locates one tensor of a model file in the region given to
// MapWeights. Cols is ne[0] (the contiguous dimension), Rows the product of
// the rest.
type WeightDesc struct {
	Name       string
	Type       ggml.Type
	Rows, Cols int
	Offset     int64 // of the tensor's first byte in the region
}

// Bytes is the tensor's size in the file.
func (d *WeightDesc) Bytes() int64 { return int64(d.Rows) * int64(d.Type.RowBytes(d.Cols)) }

// Weight is a backend's handle to one tensor of a mapped model file, made by
// MapWeights when the model is loaded: the CPU backend keeps a slice of the
// mapping, a GPU backend a buffer wrapping it and an offset. Only the backend
// that made it looks inside.
type Weight interface {
	Desc() WeightDesc
}

// Mapping is what MapWeights made of one region of a model file.
type Mapping interface {
	// Weights are the handles, one per descriptor, in the descriptors' order.
	Weights() []Weight
	// Close releases what the backend made of the region (a GPU backend's
	// buffers); its weights must not be used afterwards, and the caller
	// unmaps the region only after Close. Closing twice is harmless.
	Close() error
}

// RoPE describes rotary position embedding for one model.
type RoPE struct {
	Neox        bool      // rotate (x[i], x[i+d/2]) instead of adjacent pairs
	Dims        int       // rotated dimensions per head (usually the head dim)
	Base        float32   // theta base
	FreqFactors []float32 // per-pair divisors (Llama 3.1 rope_freqs), or nil
	PosScale    float32   // linear position scale (1 = none)
	AttnFactor  float32   // multiplies cos and sin (LongRoPE's attention factor); 0 = 1
	// YaRN (Peng et al., "YaRN: Efficient Context Window Extension of Large
	// Language Models"), as ggml's rope_yarn computes it: with ExtFactor > 0
	// each pair's angle blends the interpolated angle (position·PosScale)
	// and the extrapolated one (position) by a ramp over the pairs whose
	// wavelengths fit between BetaFast and BetaSlow rotations in OrigCtx
	// positions, and cos/sin are scaled by AttnFactor·(1 + 0.1·ln(1/PosScale)).
	// ExtFactor 0 = no YaRN (every other field as above).
	ExtFactor          float32
	BetaFast, BetaSlow float32
	OrigCtx            int
}

// Attention is the attention of one layer, passed with every call: the
// geometry must be the cache's (KVHeads, HeadDim) and the Heads it was made
// for; Scale and Window may differ from layer to layer.
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // applied to q·k, usually 1/sqrt(HeadDim)
	Window                  int     // sliding window in tokens, the query's own included; 0 = full causal
	// Softcap c > 0 replaces each score s = Scale·q·k by c·tanh(s/c) before
	// the softmax (Gemma 2); 0 = none.
	Softcap float32
	// Sinks, when set, is a one-row F32 weight of Heads learned logits
	// (gpt-oss's attention sinks): head h's softmax denominator gains
	// exp(Sinks[h] − max), as if a key with that score and a zero value were
	// attended. nil = none.
	Sinks Weight
}

// KVCache is a backend-owned cache created by NewKVCache.
type KVCache interface {
	Config() kv.Config
	// Close gives the cache's memory (and its attention workspace) back.
	Close() error
}

// EvictingCache is implemented by a cache that can drop positions
// (kv.Config.Evict; docs/ARCHITECTURE.md, "Eviction (H2O)"). KVStore,
// AttendDecode and AttendPrefill keep taking logical positions on such a
// cache; the backend maps them to its slots. A backend whose caches cannot
// evict refuses such a config in NewKVCache.
type EvictingCache interface {
	KVCache
	// Evicted reports whether positions were dropped since the sequence
	// last started at position 0: the cache then holds no contiguous
	// prefix, and nothing of it may be reused.
	Evicted() bool
	// Kept lists the logical positions the layer's kv head holds, in
	// order (nil when the cache does not evict): for tests and tools.
	Kept(layer, kvh int) []int
}

// CacheEvicted reports whether c dropped positions (EvictingCache).
func CacheEvicted(c KVCache) bool {
	e, ok := c.(EvictingCache)
	return ok && e.Evicted()
}

// ResumingCache is implemented by a cache that can say where a sequence
// can go on after eviction or a sliding-window ring's wrap, instead of
// reporting only that positions were lost (EvictingCache.Evicted).
type ResumingCache interface {
	KVCache
	// ResumableFrom is the largest p ≤ n at which the sequence can go on,
	// the next append at p keeping positions [0, p): 0 after eviction; for
	// ring layers, the largest p whose window they still hold
	// (kv.Cache.ResumableFrom).
	ResumableFrom(n int) int
}

// CacheResumableFrom is ResumableFrom on c (ResumingCache); on a cache that
// does not say, n unless it evicted (CacheEvicted), then 0.
func CacheResumableFrom(c KVCache, n int) int {
	if r, ok := c.(ResumingCache); ok {
		return r.ResumableFrom(n)
	}
	if CacheEvicted(c) {
		return 0
	}
	return n
}

// KVRotator is implemented by a backend that rotates K (kv.Config.Rotate)
// for some head dims only; sessions whose rotation is automatic do not
// rotate where it says false, and a session that asks for rotation there is
// refused. A backend without it rotates every head dim the cache accepts.
type KVRotator interface {
	RotatesHeadDim(d int) bool
}

// RotatesHeadDim reports whether backend b stores and reads K rotated for
// head dim d (KVRotator).
func RotatesHeadDim(b any, d int) bool {
	if r, ok := b.(KVRotator); ok {
		return r.RotatesHeadDim(d)
	}
	return true
}

// Backend executes the forward-pass ops (docs/ARCHITECTURE.md, "Backend
// contract"). The contract is one an asynchronous device can honour: the
// CPU backend runs each op at once, a GPU backend encodes it into a command
// buffer that Sync commits and waits for. So:
//
//   - Ops return nothing and never fail on data: the forward pass checks
//     token ids and positions before issuing the first op. An op given
//     arguments that break this contract (a programming error) reports it
//     at the next Sync.
//   - A host slice passed to an op (token ids, positions, RoPE frequency
//     factors, smoothing factors) is copied when the op is issued: the
//     caller may change or reuse it as soon as the call returns.
//   - Tensors, weights and caches are backend handles. Results are read
//     only after Sync, with Read and ReadKV.
//
// Row-major layouts throughout: a tensor of rows×n holds row r at
// [r*n, (r+1)*n). One goroutine at a time uses a backend.
type Backend interface {
	Name() string

	// Alloc returns a zeroed tensor of n floats; every byte a backend
	// allocates (tensors, caches, workspaces) is counted in AllocatedBytes.
	Alloc(n int) Tensor
	AllocatedBytes() int64
	// Free gives a tensor back; AllocatedBytes drops by its size. Freeing
	// twice is harmless.
	Free(t Tensor)
	// MapWeights makes weight handles for the tensors ds of a model file
	// whose bytes lie in region, a read-only mapping the caller keeps until
	// the Mapping is closed. Nothing is copied. Every descriptor is checked
	// here (a type this backend computes with, whole blocks, bytes inside the
	// region), so that no op fails on a weight later. The weights are not
	// counted in AllocatedBytes: they are the file's pages.
	MapWeights(region []byte, ds []WeightDesc) (Mapping, error)
	// NewKVCache allocates the cache cfg describes (the layout of
	// docs/ARCHITECTURE.md, "KV cache format") and the attention workspace
	// for heads query heads and prefill batches of up to maxBatch rows: what
	// the backend's Footprint says, besides cfg.Bytes().
	NewKVCache(cfg kv.Config, heads, maxBatch int) (KVCache, error)

	// Embed writes row tokens[i] of table into row i of dst (get_rows).
	Embed(dst Tensor, table Weight, tokens []int32)
	// RMSNorm: dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ∘ w, rows of w's width.
	RMSNorm(dst, x Tensor, w Weight, eps float32, rows int)
	// MatMul: dst[r] = W·x[r] for r < rows; x rows are Cols wide, dst rows
	// Rows wide (mat-vec for one row, mat-mat for a prefill batch).
	MatMul(dst Tensor, w Weight, x Tensor, rows int)
	// AddBias adds the one-row weight b to each of rows rows of x.
	AddBias(x Tensor, b Weight, rows int)
	// RoPE rotates the first r.Dims elements of each of the heads heads
	// (headDim apart) of rows rows of x, row i at position pos[i]: pairs
	// (2j, 2j+1), or (j, j+Dims/2) for NeoX, by pos·PosScale·
	// Base^(-2j/Dims)/FreqFactors[j] radians, the rotated pair scaled by
	// AttnFactor when it is set.
	RoPE(x Tensor, heads, headDim, rows int, pos []int32, r *RoPE)
	// KVSetSmoothing sets the layer's K channel smoothing factors
	// (KVHeads·HeadDim powers of two from a kv.Calibration; nil: none) for
	// the K rows stored and the queries attended from now on; a cache that
	// does not smooth (kv.Config.Smooths) ignores them.
	KVSetSmoothing(c KVCache, layer int, lambda []float32)
	// KVStore quantizes rows rows of K and V (KVHeads·HeadDim wide) into the
	// layer's planes at positions pos..pos+rows-1, K transformed by the
	// layer's smoothing and the cache's rotation. A cache that evicts first
	// drops what must go for the rows to fit its budget (EvictingCache).
	KVStore(c KVCache, layer int, k, v Tensor, pos, rows int)
	// AttendDecode: one query row (Heads·HeadDim) against the cached
	// positions [max(0, n-Window), n) of the layer, into out.
	AttendDecode(out, q Tensor, c KVCache, layer, n int, a *Attention)
	// AttendPrefill: rows query rows at positions past..past+rows-1, row i
	// against the cached prefix in its window and new k/v rows 0..i rounded
	// through f16 (causal). The caller stores k and v with KVStore after.
	AttendPrefill(out, q, k, v Tensor, c KVCache, layer, past, rows int, a *Attention)
	// SwiGLU: dst[i] = silu(gate[i])·up[i] for i < n.
	SwiGLU(dst, gate, up Tensor, n int)
	// GeluGLU: dst[i] = gelu_tanh(gate[i])·up[i] for i < n, with
	// gelu_tanh(x) = x/2·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
	GeluGLU(dst, gate, up Tensor, n int)
	// Scale: x[i] *= s for i < n.
	Scale(x Tensor, s float32, n int)
	// Softcap: x[i] = c·tanh(x[i]/c) for i < n (c > 0).
	Softcap(x Tensor, c float32, n int)
	// Add: dst[i] += x[i] for i < n.
	Add(dst, x Tensor, n int)
	Copy(dst Tensor, dstOff int, src Tensor, srcOff, n int)
	// Argmax writes, for each of rows rows of x (n wide), the index of its
	// largest element into dst[r] as a float (exact below 2^24): the first
	// on ties, NaN never chosen, 0 when none is above -Inf (sample.Greedy's
	// choice).
	Argmax(dst, x Tensor, rows, n int)

	// Sync runs what was issued and waits for it; it returns the first
	// error since the last Sync.
	Sync() error
	// Read copies len(dst) floats starting at off out of src (after Sync).
	Read(dst []float32, src Tensor, off int)
	// ReadKV copies the layer's K and V planes, byte for byte in the layout
	// of docs/ARCHITECTURE.md ("KV cache format": codes, then metadata, then
	// the residual window's f16 rows), into k and v, each
	// kv.Config.LayerPlaneBytes(layer) bytes (after Sync; for tests and
	// tools). A sliding-window layer's planes hold its ring's slots
	// (kv.Config.LayerSlots, position p at slot p mod window), not Ctx
	// positions.
	ReadKV(c KVCache, layer int, k, v []byte) error
	// Close releases everything the backend holds; its tensors, caches and
	// weights must not be used afterwards.
	Close() error
}

// Gating is how a mixture-of-experts router turns its logits into the
// chosen experts' weights.
type Gating int

const (
	// GatingSoftmax: softmax over all experts' logits, then the top k
	// (Mixtral, Qwen3-MoE).
	GatingSoftmax Gating = iota
	// GatingSoftmaxTopK: the top k logits, then a softmax over those k
	// (gpt-oss).
	GatingSoftmaxTopK
	// GatingSigmoid: sigmoid of each logit, then the top k.
	GatingSigmoid
)

// Router describes one layer's expert choice.
type Router struct {
	Experts, Used int     // experts in the layer; chosen per token (k)
	Gating        Gating  // how the weights are made
	Norm          bool    // divide the chosen weights by their sum
	Scale         float32 // multiplies the final weights; 0 = 1
}

// Experts is implemented by a backend that runs mixture-of-experts
// feed-forward blocks (docs/ARCHITECTURE.md, "Mixture of experts"). The
// expert ids stay in a tensor (as floats, exact below 2^24, as Argmax
// writes them), so a GPU backend routes without a trip to the host. A
// token's k chosen experts are its k slots: slot s = row·k + j.
type Experts interface {
	// Route writes, for each of rows rows of logits (r.Experts wide), the
	// ids of the r.Used experts with the largest logits to ids[row·Used+j]
	// (descending logit, the lower id first on ties) and their weights, by
	// r.Gating, r.Norm and r.Scale, to weights[row·Used+j].
	Route(ids, weights, logits Tensor, rows int, r *Router)
	// MatMulID: dst[s] = W_e·x[row] (xPerSlot false: one x row per token,
	// shared by its k slots) or W_e·x[s] (xPerSlot true), e = ids[s], for
	// the rows·k slots. w stacks experts matrices of w.Desc().Rows/experts
	// rows each (a 3-D GGUF tensor). Only the chosen experts' rows are read;
	// a prefill batch reads each chosen expert's matrix once.
	MatMulID(dst Tensor, w Weight, experts int, x, ids Tensor, rows, k int, xPerSlot bool)
	// AddBiasID: x[s] += b[e] for the slots s < slots, e = ids[s]; b holds
	// experts rows (an expert's bias).
	AddBiasID(x Tensor, b Weight, experts int, ids Tensor, slots int)
	// SumExperts: dst[row] = Σ_j weights[row·k+j]·y[row·k+j] for rows rows
	// of n floats.
	SumExperts(dst, y, weights Tensor, rows, k, n int)
	// SwiGLUClamped is gpt-oss's gate: with g = min(gate[i], limit) and
	// u = clamp(up[i], −limit, limit), dst[i] = g·sigmoid(alpha·g)·(u + 1).
	SwiGLUClamped(dst, gate, up Tensor, n int, alpha, limit float32)
}

// Gemma4Ops is implemented by a backend that runs Gemma 4
// (docs/ARCHITECTURE.md, "Model families"): the two ops its forward pass
// needs beyond Backend. A backend without them refuses Gemma 4 files at
// load.
type Gemma4Ops interface {
	// RMSNormPlain: dst[r] = x[r] / sqrt(mean(x[r]²) + eps) for rows rows
	// of n floats: RMSNorm without a weight (Gemma 4's value norm, each
	// head of v normalised alone). dst may be x.
	RMSNormPlain(dst, x Tensor, eps float32, rows, n int)
	// CopyRows copies rows blocks of n floats:
	// dst[dstOff + r·dstStride + i] = src[srcOff + r·srcStride + i] for
	// r < rows, i < n (one layer's slice of every token's per-layer
	// inputs). dst and src are different tensors.
	CopyRows(dst Tensor, dstOff, dstStride int, src Tensor, srcOff, srcStride, rows, n int)
}

// ExpertScaler is implemented by a backend that runs Gemma 4's
// mixture of experts, whose router scales each chosen expert's weight by a
// learned per-expert factor (transformers' per_expert_scale, llama.cpp's
// ffn_down_exps.scale). A backend without it refuses such files at load.
type ExpertScaler interface {
	// ScaleByExpert: x[s] *= w[e], e = ids[s] (floats, as Route writes
	// them), for the slots s < slots; w is one row of experts floats.
	ScaleByExpert(x Tensor, w Weight, experts int, ids Tensor, slots int)
}
