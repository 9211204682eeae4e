package model

import (
	"math"

	"nibble/engine/backend"
	"nibble/engine/family"
)

// Supported reports whether arch is a registered family (engine/family),
// whose files this engine loads and runs.
func Supported(arch string) bool { _, ok := family.Lookup(arch); return ok }

// FamilyHParams is hp for arch with the family's traits set (RoPE flavour,
// biases, norms, soft-caps, window pattern), for writers that build a model
// from sizes rather than read one, and as the start of reading a file; the
// caller fills in the sizes. An unregistered arch gets no traits.
func FamilyHParams(arch string) HParams {
	f, _ := family.Lookup(arch)
	t := f.Traits
	gating, _ := backendGating(t.Experts.Gating)
	return HParams{
		Arch: arch, RopeScale: 1, Window: t.Window,
		RopeNeox: t.RopeNeox, QKVBias: t.QKVBias, QKNorm: t.QKNorm, PostNorms: t.PostNorms,
		GeluFFN: t.GeluFFN, EmbdScale: t.EmbdScale, AttnSoftcap: t.AttnSoftcap, FinalSoftcap: t.FinalSoftcap,
		SWAPattern: t.SWAPattern, RopeBaseLocal: t.RopeBaseLocal, AttnScale: t.AttnScale,
		VNorm: t.VNorm, RopeFreqsGlobal: t.RopeFreqsGlobal,
		ExpertNorm: t.Experts.Norm, ExpertGating: gating,
	}
}

// forward is every family's forward pass: pre-norm blocks whose layer spec
// decides the rest (q/k norms, RoPE, window, soft-cap, activation, post
// norms), between the embeddings (scaled where the family scales them) and
// the output (soft-capped where it caps).
func forward(s *State, p *pass) error {
	s.embed(p)
	if s.pl != nil {
		s.perLayerInputs(p)
	}
	for li := range s.m.Layers {
		l, ls := &s.m.Layers[li], &s.specs[li]
		if err := s.attention(p, li); err != nil {
			return err
		}
		if ls.PostNorms {
			s.postNorm(p, l.AttnPostNorm)
		}
		s.residual(p)
		if ls.MoE {
			s.moeFeedForward(p, li)
		} else {
			s.feedForward(p, li)
		}
		if ls.PostNorms {
			s.postNorm(p, l.FFNPostNorm)
		}
		s.residual(p)
		if s.pl != nil {
			s.perLayerInput(p, li)
			s.residual(p)
		}
		if l.OutScale != 0 {
			s.b.Scale(s.x, l.OutScale, p.n*s.m.HP.Embd)
		}
	}
	s.storeDeferred(p)
	return s.output(p)
}

// Activation is a feed-forward block's gate function.
type Activation int

const (
	SwiGLU        Activation = iota // down(silu(gate)·up)
	GeluTanhGLU                     // down(gelu_tanh(gate)·up)
	SwiGLUClamped                   // gpt-oss's clamped SwiGLU (backend.Experts.SwiGLUClamped)
)

// LayerSpec is how one block computes, derived from HParams by Layer: the
// forward pass, the cache and the estimator (through LayerWindows) read it
// per layer rather than model-wide.
type LayerSpec struct {
	Window    int          // sliding window in tokens; 0 = global attention
	Rope      backend.RoPE // base, scaling and flavour of this layer (FreqFactors set by the state)
	Scale     float32      // on q·k
	Softcap   float32      // attention logit soft-cap; 0 = none
	QKNorm    bool         // per-head RMSNorm of q and k before RoPE
	PostNorms bool         // RMSNorm of the attention and feed-forward outputs before the residual add
	Act       Activation
	// HeadDim, KVHeads and FF are this layer's (Gemma 4's differ between
	// sliding and global layers).
	HeadDim, KVHeads, FF int
	// KVSource is the layer whose cache this one attends over: itself, or
	// for a layer that shares K/V, the layer it reads (HParams.KVSource).
	KVSource int
	VNorm    bool // v RMS-normalised per head without a weight

	// MoE makes the block's feed-forward a mixture of experts: Router
	// chooses them, ExpertAct is their gate (with ClampAlpha and ClampLimit
	// for SwiGLUClamped), and the layout of engine/family says which
	// biases, shared experts or dense feed-forward come with them.
	MoE                    bool
	Router                 backend.Router
	ExpertAct              Activation
	ClampAlpha, ClampLimit float32
}

// Layer is the spec of block il.
func (hp HParams) Layer(il int) LayerSpec {
	ls := LayerSpec{
		Scale: hp.QKScale(), Softcap: hp.AttnSoftcap, QKNorm: hp.QKNorm, PostNorms: hp.PostNorms,
		Rope: backend.RoPE{Neox: hp.RopeNeox, Dims: hp.RopeDimsOf(il), Base: hp.RopeBase, PosScale: hp.RopeScale, AttnFactor: hp.RopeAttnFactor,
			ExtFactor: hp.RopeExtFactor, BetaFast: hp.RopeBetaFast, BetaSlow: hp.RopeBetaSlow, OrigCtx: hp.RopeCtxOrig},
		HeadDim: hp.HeadDimOf(il), KVHeads: hp.KVHeadsOf(il), FF: hp.FFOf(il), KVSource: hp.KVSource(il), VNorm: hp.VNorm,
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
	if hp.MoE() {
		ls.MoE = true
		ls.Router = backend.Router{Experts: hp.Experts, Used: hp.ExpertsUsed, Gating: hp.ExpertGating, Norm: hp.ExpertNorm, Scale: hp.ExpertScale}
		ls.ExpertAct = ls.Act
		if f, _ := family.Lookup(hp.Arch); f.Traits.Experts.Act == family.ExpertSwiGLUClamped {
			ls.ExpertAct, ls.ClampAlpha, ls.ClampLimit = SwiGLUClamped, f.Traits.Experts.ClampAlpha, f.Traits.Experts.ClampLimit
		}
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
