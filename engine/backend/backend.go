// Package backend is the small set of ops a model family's forward pass is
// written against (docs/ARCHITECTURE.md, "Backend contract"). The CPU backend
// executes each op at once; a GPU backend (Metal, planned) encodes them into
// a command buffer and runs it at Sync.
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
}

// Attention is the attention of one layer, passed with every call: the
// geometry must be the cache's (KVHeads, HeadDim) and the Heads it was made
// for; Scale and Window may differ from layer to layer.
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // applied to q·k, usually 1/sqrt(HeadDim)
	Window                  int     // sliding window in tokens, the query's own included; 0 = full causal
}

// KVCache is a backend-owned cache created by NewKVCache.
type KVCache interface {
	Config() kv.Config
	// Close gives the cache's memory (and its attention workspace) back.
	Close() error
}

// Backend executes the forward-pass ops. Row-major layouts throughout: a
// tensor of rows×n holds row r at [r*n, (r+1)*n).
type Backend interface {
	Name() string
	// Alloc returns a zeroed tensor of n floats; every byte a backend
	// allocates (tensors, caches, workspaces) is counted in AllocatedBytes.
	Alloc(n int) Tensor
	AllocatedBytes() int64
	// Free gives a tensor back; AllocatedBytes drops by its size.
	Free(t Tensor)
	// MapWeights makes weight handles for the tensors ds of a model file
	// whose bytes lie in region, a read-only mapping the caller keeps until
	// the Mapping is closed. Nothing is copied. Every descriptor is checked
	// here (a type this backend computes with, whole blocks, bytes inside the
	// region), so that no op fails on a weight later. The weights are not
	// counted in AllocatedBytes: they are the file's pages.
	MapWeights(region []byte, ds []WeightDesc) (Mapping, error)
	// NewKVCache allocates the cache cfg describes and the attention
	// workspace for heads query heads and prefill batches of up to maxBatch
	// rows.
	NewKVCache(cfg kv.Config, heads, maxBatch int) (KVCache, error)

	Embed(dst Tensor, table Weight, tokens []int32)
	RMSNorm(dst, x Tensor, w Weight, eps float32, rows int)
	// MatMul: dst[r] = W·x[r] for r < rows; dst rows are W.Rows wide.
	MatMul(dst Tensor, w Weight, x Tensor, rows int)
	AddBias(x Tensor, b Weight, rows int)
	// RoPE rotates rows of `heads` heads, row r at position pos[r].
	RoPE(x Tensor, heads, headDim, rows int, pos []int32, r *RoPE)
	// KVSetSmoothing sets the layer's K channel smoothing factors
	// (KVHeads·HeadDim powers of two from a kv.Calibration; nil: none) for
	// the K rows stored and the queries attended from now on; a cache that
	// does not smooth (kv.Config.Smooths) ignores them.
	KVSetSmoothing(c KVCache, layer int, lambda []float32)
	// KVStore writes rows of K and V (KVHeads*HeadDim wide) at pos..pos+rows-1.
	KVStore(c KVCache, layer int, k, v Tensor, pos, rows int)
	// AttendDecode: one query row against the first n cached positions.
	AttendDecode(out, q Tensor, c KVCache, layer, n int, a *Attention)
	// AttendPrefill: rows query rows at positions past..past+rows-1 against
	// the cached prefix [0, past) and the new k/v rows (causal).
	AttendPrefill(out, q, k, v Tensor, c KVCache, layer, past, rows int, a *Attention)
	SwiGLU(dst, gate, up Tensor, n int)
	Add(dst, x Tensor, n int)
	Copy(dst Tensor, dstOff int, src Tensor, srcOff, n int)
	// Read copies n=len(dst) floats starting at off out of src (after Sync).
	Read(dst []float32, src Tensor, off int)
	Sync() error
	Close() error
}
