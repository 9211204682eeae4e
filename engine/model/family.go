package model

import (
	"math"

	"nibble/engine/backend"
)

// family is what the engine knows of one architecture: its forward pass
// (in the family's file), its tensor table, and the HParams fields it fixes
// or defaults (before the file's keys are read).
type family struct {
	forward func(s *State, p *pass) error
	layout  func(hp HParams) []TensorSpec
	flags   HParams
	// ignoresWindow: the file's sliding_window is not applied (llama.cpp
	// disables Phi-3's).
	ignoresWindow bool
	// tied: the output matrix is token_embd even where the file has an
	// output.weight (llama.cpp's Gemma).
	tied bool
}

// Families this engine runs. Gemma 2 defaults its caps and window as
// llama.cpp does when the file lacks the keys.
var families = map[string]family{
	"llama":  {forward: forwardLlama, layout: llamaLayout},
	"qwen2":  {forward: forwardLlama, layout: llamaLayout, flags: HParams{RopeNeox: true, QKVBias: true}},
	"qwen3":  {forward: forwardQwen3, layout: qwen3Layout, flags: HParams{RopeNeox: true, QKNorm: true}},
	"gemma2": {forward: forwardGemma, layout: gemmaLayout, flags: HParams{RopeNeox: true, PostNorms: true, GeluFFN: true, EmbdScale: true, AttnSoftcap: 50, FinalSoftcap: 30, SWAPattern: 2, Window: 4096}, tied: true},
	"gemma3": {forward: forwardGemma, layout: gemmaLayout, flags: HParams{RopeNeox: true, QKNorm: true, PostNorms: true, GeluFFN: true, EmbdScale: true, SWAPattern: 6, RopeBaseLocal: 10000}, tied: true},
	"phi3":   {forward: forwardPhi3, layout: phi3Layout, flags: HParams{RopeNeox: true}, ignoresWindow: true},
}

// Activation is a feed-forward block's gate function.
type Activation int

const (
	SwiGLU      Activation = iota // down(silu(gate)·up)
	GeluTanhGLU                   // down(gelu_tanh(gate)·up)
)

// LayerSpec is how one block computes, derived from HParams by Layer: the
// forward pass and (in a later step) the estimator and the cache read it
// per layer rather than model-wide.
type LayerSpec struct {
	Window    int          // sliding window in tokens; 0 = global attention
	Rope      backend.RoPE // base, scaling and flavour of this layer (FreqFactors set by the state)
	Scale     float32      // on q·k
	Softcap   float32      // attention logit soft-cap; 0 = none
	QKNorm    bool         // per-head RMSNorm of q and k before RoPE
	PostNorms bool         // RMSNorm of the attention and feed-forward outputs before the residual add
	Act       Activation
}

// Layer is the spec of block il.
func (hp HParams) Layer(il int) LayerSpec {
	ls := LayerSpec{
		Scale: hp.QKScale(), Softcap: hp.AttnSoftcap, QKNorm: hp.QKNorm, PostNorms: hp.PostNorms,
		Rope: backend.RoPE{Neox: hp.RopeNeox, Dims: hp.RopeDims, Base: hp.RopeBase, PosScale: hp.RopeScale, AttnFactor: hp.RopeAttnFactor},
	}
	if hp.SlidingLayer(il) {
		ls.Window = hp.Window
		if hp.RopeBaseLocal > 0 {
			// Gemma 3's local layers: their own base, no position scaling
			// (llama.cpp's rope_freq_base/scale_train_swa).
			ls.Rope.Base, ls.Rope.PosScale = hp.RopeBaseLocal, 1
		}
	}
	if hp.GeluFFN {
		ls.Act = GeluTanhGLU
	}
	return ls
}

// EmbdScaleFactor is the factor on the token embeddings (1: none).
func (hp HParams) EmbdScaleFactor() float32 {
	if hp.EmbdScale {
		return float32(math.Sqrt(float64(hp.Embd)))
	}
	return 1
}

// ropeFactors are the per-pair divisors for a cache of ctx positions:
// Phi-3's long factors when ctx exceeds the original context (as llama.cpp
// chooses, by context size), else its short ones, else rope_freqs.
func (m *Model) ropeFactorsFor(ctx int) []float32 {
	switch {
	case m.RopeFactorsLong != nil && ctx > m.HP.RopeCtxOrig:
		return m.RopeFactorsLong
	case m.RopeFactorsShort != nil:
		return m.RopeFactorsShort
	}
	return m.RopeFreqs
}
