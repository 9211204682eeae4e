// Package model holds the model families' forward passes, written once
// against backend ops, and their hyper-parameters read from GGUF metadata.
package model

import (
	"fmt"
	"math"
	"slices"

	"nibble/engine/backend"
	"nibble/engine/family"
	"nibble/engine/gguf"
	"nibble/engine/kv"
)

// HParams are the architecture numbers a forward pass and the memory
// estimator need. They come from GGUF metadata or from the model catalog.
type HParams struct {
	Arch       string // general.architecture: a registered family (engine/family), or any for the estimator
	Layers     int
	Embd       int
	Heads      int
	KVHeads    int
	HeadDim    int // attention.key_length (= value_length), else Embd/Heads
	FF         int
	Vocab      int
	CtxTrain   int
	RopeBase   float32
	RopeDims   int
	RopeNeox   bool
	RopeScale  float32 // linear position scale factor (1 = none)
	RMSEps     float32
	Window     int  // sliding-window attention in tokens, 0 = none; which layers use it: SWAPattern
	TiedOutput bool // logits use token_embd when there is no output.weight
	QKVBias    bool
	// AttnScale multiplies q·k (llama.cpp's <arch>.attention.scale); 0 means
	// the family's default, usually 1/sqrt(HeadDim).
	AttnScale float32

	// The fields below are set by the family's traits (engine/family) and,
	// for some, the file's keys; they are zero for llama and qwen2.

	QKNorm    bool // per-head RMSNorm of q and k before RoPE (attn_q_norm, attn_k_norm)
	PostNorms bool // post_attention_norm and post_ffw_norm on the blocks' outputs
	GeluFFN   bool // GELU-tanh gated feed-forward instead of SwiGLU
	EmbdScale bool // embeddings multiplied by sqrt(Embd)
	// AttnSoftcap c caps attention logits to c·tanh(s/c) before the softmax;
	// FinalSoftcap does the same to the output logits. 0 = none.
	AttnSoftcap, FinalSoftcap float32
	// SWAPattern p says which layers use Window: p = 0, every layer; else
	// layer il iff il%p < p-1 (llama.cpp's swa pattern: Gemma 2 is 2,
	// Gemma 3 is 6).
	SWAPattern int
	// RopeBaseLocal is the RoPE base of sliding-window layers (Gemma 3's
	// 10000, not in the file); 0 = RopeBase. Local layers also use no
	// position scaling there.
	RopeBaseLocal float32
	// RopeCtxOrig is Phi-3's rope.scaling.original_context_length: a cache
	// longer than it uses rope_factors_long, else rope_factors_short.
	RopeCtxOrig int
	// RopeAttnFactor scales RoPE's cos and sin (LongRoPE's attention
	// factor, rope.scaling.attn_factor; YaRN's rope.scaling.yarn_attn_factor);
	// 0 = 1.
	RopeAttnFactor float32
	// YaRN (rope.scaling.type yarn, as llama.cpp reads it): RopeScale is
	// 1/rope.scaling.factor, RopeExtFactor the ramp's weight
	// (rope.scaling.yarn_ext_factor, 1 when absent), the betas bound the
	// ramp (yarn_beta_fast 32, yarn_beta_slow 1 when absent) over
	// RopeCtxOrig (rope.scaling.original_context_length, else the training
	// context). RopeExtFactor 0 = no YaRN.
	RopeExtFactor, RopeBetaFast, RopeBetaSlow float32

	// Per-layer shapes (Gemma 4); zero values mean the model-wide fields.

	// HeadDimLocal is the head dim of sliding-window layers
	// (attention.key_length_swa); HeadDim is then the global layers'.
	HeadDimLocal int
	// RopeDimsLocal is the rotated dims of sliding-window layers
	// (rope.dimension_count_swa).
	RopeDimsLocal int
	// LayerKVHeads and LayerFF are attention.head_count_kv and
	// feed_forward_length where the file gives one per layer.
	LayerKVHeads, LayerFF []int
	// SlidingLayers is attention.sliding_window_pattern where the file
	// names each layer (true: sliding); nil: SWAPattern.
	SlidingLayers []bool
	// SharedKVLayers is attention.shared_kv_layers: the last that many
	// layers store no K/V and attend over the cache of the last earlier
	// layer of their kind (sliding or global).
	SharedKVLayers int
	// PerLayerEmbd is embedding_length_per_layer_input: the width of each
	// layer's slice of the per-layer token embeddings (0: none).
	PerLayerEmbd int
	VNorm        bool // v RMS-normalised per head without a weight (family trait)
	// RopeFreqsGlobal: rope_freqs apply to global layers only (trait).
	RopeFreqsGlobal bool

	// Mixture of experts (docs/ARCHITECTURE.md, "Mixture of experts"):
	// Experts > 0 makes every block's feed-forward a router over Experts
	// experts of which ExpertsUsed run per token.
	Experts, ExpertsUsed int
	ExpertFF             int            // an expert's width (expert_feed_forward_length)
	SharedFF             int            // the shared experts' width (expert_shared_feed_forward_length); 0 = none
	ExpertGating         backend.Gating // expert_gating_func, else the family's
	ExpertNorm           bool           // chosen weights divided by their sum (expert_weights_norm, else the family's)
	ExpertScale          float32        // on the chosen weights (expert_weights_scale); 0 = 1
}

// HeadDimOf is layer il's head dim.
func (hp HParams) HeadDimOf(il int) int {
	if hp.HeadDimLocal > 0 && hp.SlidingLayer(il) {
		return hp.HeadDimLocal
	}
	return hp.HeadDim
}

// KVHeadsOf is layer il's kv head count.
func (hp HParams) KVHeadsOf(il int) int {
	if il >= 0 && il < len(hp.LayerKVHeads) {
		return hp.LayerKVHeads[il]
	}
	return hp.KVHeads
}

// FFOf is layer il's feed-forward width.
func (hp HParams) FFOf(il int) int {
	if il >= 0 && il < len(hp.LayerFF) {
		return hp.LayerFF[il]
	}
	return hp.FF
}

// RopeDimsOf is layer il's rotated dims per head.
func (hp HParams) RopeDimsOf(il int) int {
	if hp.RopeDimsLocal > 0 && hp.SlidingLayer(il) {
		return hp.RopeDimsLocal
	}
	return hp.RopeDims
}

// KVLayers is the number of layers that store K/V: the first
// Layers − SharedKVLayers; the rest read one of theirs.
func (hp HParams) KVLayers() int { return hp.Layers - hp.SharedKVLayers }

// KVSource is the layer whose cache layer il attends over: il itself, or
// for a layer that shares, the last layer before the sharing starts of the
// same kind (sliding or global), as transformers' Gemma 4 does; -1 when
// there is none.
func (hp HParams) KVSource(il int) int {
	first := hp.KVLayers()
	if il < first {
		return il
	}
	for j := first - 1; j >= 0; j-- {
		if hp.SlidingLayer(j) == hp.SlidingLayer(il) {
			return j
		}
	}
	return -1
}

// KVShareSources lists the layers whose cache later layers read, in
// order.
func (hp HParams) KVShareSources() []int {
	var src []int
	for il := hp.KVLayers(); il < hp.Layers; il++ {
		if j := hp.KVSource(il); j >= 0 && !slices.Contains(src, j) {
			src = append(src, j)
		}
	}
	slices.Sort(src)
	return src
}

// CacheConfig is cfg (type, context, residual window, rotation, smoothing,
// eviction) shaped for hp: one cache layer per layer that stores K/V, each
// with its head shape and, unless cfg evicts or rings is false, the ring
// of its sliding window. Model.NewState and the estimator both call it.
func (hp HParams) CacheConfig(cfg kv.Config, rings bool) kv.Config {
	n := hp.KVLayers()
	cfg.Layers, cfg.KVHeads, cfg.HeadDim = n, hp.KVHeadsOf(0), hp.HeadDimOf(0)
	cfg.LayerHeadDim, cfg.LayerKVHeads = nil, nil
	for il := range n {
		if hp.KVHeadsOf(il) != cfg.KVHeads || hp.HeadDimOf(il) != cfg.HeadDim {
			cfg.LayerHeadDim, cfg.LayerKVHeads = make([]int, n), make([]int, n)
			for j := range n {
				cfg.LayerHeadDim[j], cfg.LayerKVHeads[j] = hp.HeadDimOf(j), hp.KVHeadsOf(j)
			}
			break
		}
	}
	if len(cfg.LayerWindow) == hp.Layers {
		cfg.LayerWindow = cfg.LayerWindow[:n] // a caller's windows for every layer: the cache's layers are the first n
	}
	if rings && cfg.LayerWindow == nil && !cfg.Evicts() {
		if w := hp.LayerWindows(); w != nil {
			cfg.LayerWindow = w[:n]
		}
	}
	return cfg
}

// MaxHeadDim, MaxKVHeads and MaxFF are the widest of any layer: the
// activations are sized for them.
func (hp HParams) MaxHeadDim() int { return max(hp.HeadDim, hp.HeadDimLocal) }

func (hp HParams) MaxKVHeads() int {
	n := hp.KVHeads
	for _, v := range hp.LayerKVHeads {
		n = max(n, v)
	}
	return n
}

func (hp HParams) MaxFF() int {
	n := hp.FF
	for _, v := range hp.LayerFF {
		n = max(n, v)
	}
	return n

}

// MoE reports whether the blocks' feed-forward is a mixture of experts.
func (hp HParams) MoE() bool { return hp.Experts > 0 }

// DenseFF is the width of the dense feed-forward activations a block
// needs: FF for dense blocks and dense blocks beside the experts, the shared
// experts' width for a mixture with shared experts, else 0.
func (hp HParams) DenseFF() int {
	f, _ := family.Lookup(hp.Arch)
	switch {
	case !hp.MoE() || f.Tensors.DenseBesideExperts:
		return max(hp.FF, hp.SharedFF)
	}
	return hp.SharedFF
}

// QKScale is the factor attention applies to q·k.
func (hp HParams) QKScale() float32 {
	if hp.AttnScale > 0 {
		return hp.AttnScale
	}
	if f, _ := family.Lookup(hp.Arch); f.Quirks.WideScaleLayers > 0 && hp.Layers == f.Quirks.WideScaleLayers {
		// llama.cpp: Gemma 2 and 3 27B scale by 1/sqrt(n_embd/n_head)
		// (their query_pre_attn_scalar), every other size by the head dim.
		return float32(1 / math.Sqrt(float64(hp.Embd/hp.Heads)))
	}
	return float32(1 / math.Sqrt(float64(hp.HeadDim)))
}

// SlidingLayer reports whether layer il attends over Window tokens only.
func (hp HParams) SlidingLayer(il int) bool {
	if hp.Window <= 0 {
		return false
	}
	if hp.SlidingLayers != nil {
		return il >= 0 && il < len(hp.SlidingLayers) && hp.SlidingLayers[il]
	}
	p := hp.SWAPattern
	return p == 0 || il%p < p-1
}

// HParamsFromGGUF reads the hyper-parameters of a family this engine runs.
func HParamsFromGGUF(f *gguf.File) (HParams, error) {
	if arch := f.Arch(); !Supported(arch) {
		return HParams{}, fmt.Errorf("architecture %q is not supported (want %s)", arch, family.List(family.Names()))
	}
	return ReadHParams(f)
}

// ReadHParams reads the standard metadata keys of any architecture (the
// estimator sizes models this engine cannot run yet from it); family flags
// and keys are read for the families it runs.
func ReadHParams(f *gguf.File) (HParams, error) {
	arch := f.Arch()
	if arch == "" {
		return HParams{}, fmt.Errorf("general.architecture is missing")
	}
	hp := FamilyHParams(arch)
	need := func(key string, dst *int) error {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			return fmt.Errorf("metadata %s.%s is missing", arch, key)
		}
		if v == 0 || v > 1<<24 {
			return fmt.Errorf("metadata %s.%s = %d is out of range", arch, key, v)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		key string
		dst *int
	}{
		{"block_count", &hp.Layers}, {"embedding_length", &hp.Embd},
		{"attention.head_count", &hp.Heads}, {"context_length", &hp.CtxTrain},
	} {
		if err := need(k.key, k.dst); err != nil {
			return HParams{}, err
		}
	}
	// feed_forward_length and head_count_kv may give one value per layer
	// (llama.cpp's get_key_or_arr): the first is then the model-wide one.
	var err error
	if hp.FF, hp.LayerFF, err = perLayer(f, arch+".feed_forward_length", hp.Layers, true); err != nil {
		return HParams{}, err
	}
	if hp.KVHeads, hp.LayerKVHeads, err = perLayer(f, arch+".attention.head_count_kv", hp.Layers, false); err != nil {
		return HParams{}, err
	}
	if hp.KVHeads == 0 {
		hp.KVHeads = hp.Heads
	}
	hp.HeadDim = hp.Embd / hp.Heads
	if v, ok := f.Uint(arch + ".attention.key_length"); ok {
		hp.HeadDim = int(v)
	}
	if v, ok := f.Uint(arch + ".attention.value_length"); ok && int(v) != hp.HeadDim {
		return HParams{}, fmt.Errorf("model %s: value length %d differs from key length %d, which this engine does not support", arch, v, hp.HeadDim)
	}
	if v, ok := f.Uint(arch + ".attention.key_length_swa"); ok {
		hp.HeadDimLocal = int(v)
		if w, ok := f.Uint(arch + ".attention.value_length_swa"); ok && w != v {
			return HParams{}, fmt.Errorf("model %s: sliding layers' value length %d differs from their key length %d, which this engine does not support", arch, w, v)
		}
	}
	hp.RopeDims = hp.HeadDim
	if v, ok := f.Uint(arch + ".rope.dimension_count"); ok {
		hp.RopeDims = int(v)
	}
	if v, ok := f.Uint(arch + ".rope.dimension_count_swa"); ok {
		hp.RopeDimsLocal = int(v)
	} else if hp.HeadDimLocal > 0 {
		hp.RopeDimsLocal = hp.HeadDimLocal
	}
	if v, ok := f.Float(arch + ".rope.freq_base_swa"); ok {
		hp.RopeBaseLocal = float32(v)
	}
	if v, ok := f.Uint(arch + ".attention.shared_kv_layers"); ok {
		hp.SharedKVLayers = int(min(v, 1<<24))
	}
	if fam, _ := family.Lookup(arch); fam.Tensors.PerLayerInputs {
		if v, ok := f.Uint(arch + ".embedding_length_per_layer_input"); ok {
			hp.PerLayerEmbd = int(min(v, 1<<24))
		}
	}
	if pat, ok := f.Bools(arch + ".attention.sliding_window_pattern"); ok {
		if len(pat) != hp.Layers {
			return HParams{}, fmt.Errorf("model %s: sliding_window_pattern names %d layers of %d", arch, len(pat), hp.Layers)
		}
		hp.SlidingLayers = pat
	} else if v, ok := f.Uint(arch + ".attention.sliding_window_pattern"); ok {
		hp.SWAPattern = int(min(v, 1<<24))
	}
	hp.RopeBase = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		hp.RopeBase = float32(v)
	}
	scaling, _ := f.String(arch + ".rope.scaling.type")
	if scaling == "linear" || scaling == "yarn" {
		if v, ok := f.Float(arch + ".rope.scaling.factor"); ok && v > 0 {
			hp.RopeScale = float32(1 / v)
		}
	}
	if v, ok := f.Uint(arch + ".rope.scaling.original_context_length"); ok {
		hp.RopeCtxOrig = int(v)
	}
	if v, ok := f.Float(arch + ".rope.scaling.attn_factor"); ok {
		hp.RopeAttnFactor = float32(v)
	}
	if scaling == "yarn" {
		readYaRN(f, arch, &hp)
	}
	hp.RMSEps = 1e-5
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		hp.RMSEps = float32(v)
	}
	if v, ok := f.Float(arch + ".attention.scale"); ok {
		hp.AttnScale = float32(v)
	}
	if v, ok := f.Uint(arch + ".attention.sliding_window"); ok {
		hp.Window = int(v)
	}
	// Only a family that soft-caps (its default is set) reads the caps, as
	// llama.cpp reads them for Gemma 2 alone.
	if v, ok := f.Float(arch + ".attn_logit_softcapping"); ok && hp.AttnSoftcap > 0 {
		hp.AttnSoftcap = float32(v)
	}
	if v, ok := f.Float(arch + ".final_logit_softcapping"); ok && hp.FinalSoftcap > 0 {
		hp.FinalSoftcap = float32(v)
	}
	fam, _ := family.Lookup(arch)
	if fam.Traits.AttnScale > 0 {
		hp.AttnScale = fam.Traits.AttnScale // llama.cpp fixes it whatever the file says
	}
	if fam.Quirks.IgnoresWindow {
		hp.Window = 0
	}
	if n, ok := f.ArrayLen("tokenizer.ggml.tokens"); ok {
		hp.Vocab = n
	} else if v, ok := f.Uint(arch + ".vocab_size"); ok {
		hp.Vocab = int(v)
	}
	_, hasOutput := f.Tensor("output.weight")
	hp.TiedOutput = !hasOutput || fam.Quirks.TiedOutput
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 && hp.Vocab == 0 {
		hp.Vocab = int(t.Dims[1])
	}
	if err := readExperts(f, &hp); err != nil {
		return HParams{}, err
	}
	return hp, hp.Validate()
}

// readYaRN reads the YaRN keys with llama.cpp's defaults: ext factor 1
// (its "not set" resolves to 1 for YaRN), betas 32 and 1, attention factor
// 1, original context the training one.
func readYaRN(f *gguf.File, arch string, hp *HParams) {
	hp.RopeExtFactor, hp.RopeBetaFast, hp.RopeBetaSlow = 1, 32, 1
	for _, k := range []struct {
		key string
		dst *float32
	}{
		{"yarn_ext_factor", &hp.RopeExtFactor}, {"yarn_beta_fast", &hp.RopeBetaFast},
		{"yarn_beta_slow", &hp.RopeBetaSlow}, {"yarn_attn_factor", &hp.RopeAttnFactor},
	} {
		if v, ok := f.Float(arch + ".rope.scaling." + k.key); ok {
			*k.dst = float32(v)
		}
	}
	if hp.RopeCtxOrig == 0 {
		hp.RopeCtxOrig = hp.CtxTrain
	}
}

// readExperts reads the mixture-of-experts keys llama.cpp reads
// (<arch>.expert_*), the family's defaults where a key is absent.
func readExperts(f *gguf.File, hp *HParams) error {
	arch := hp.Arch
	u := func(key string) (int, bool, error) {
		v, ok := f.Uint(arch + "." + key)
		if ok && v > 1<<24 {
			return 0, false, fmt.Errorf("metadata %s.%s = %d is out of range", arch, key, v)
		}
		return int(v), ok, nil
	}
	n, _, err := u("expert_count")
	if err != nil || n == 0 {
		return err
	}
	fam, _ := family.Lookup(arch)
	ft := fam.Traits.Experts
	hp.Experts = n
	used, ok, err := u("expert_used_count")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("model %s: %d experts but metadata %s.expert_used_count is missing", arch, n, arch)
	}
	hp.ExpertsUsed = used
	if hp.ExpertFF, ok, err = u("expert_feed_forward_length"); err != nil {
		return err
	} else if !ok {
		hp.ExpertFF = hp.FF
		if ft.FFPerUsed && used > 0 {
			hp.ExpertFF = hp.FF / used
		}
	}
	if hp.SharedFF, _, err = u("expert_shared_feed_forward_length"); err != nil {
		return err
	}
	if v, ok := f.Float(arch + ".expert_weights_scale"); ok {
		hp.ExpertScale = float32(v)
	}
	hp.ExpertNorm = ft.Norm
	if v, ok := f.Bool(arch + ".expert_weights_norm"); ok {
		hp.ExpertNorm = v
	}
	g := ft.Gating
	if v, ok := f.Uint(arch + ".expert_gating_func"); ok {
		g = family.Gating(v)
	}
	if hp.ExpertGating, err = backendGating(g); err != nil && fam.Name != "" {
		return fmt.Errorf("model %s: %w", arch, err)
	}
	return nil
}

// backendGating maps llama.cpp's expert_gating_func numbering to the
// backend's.
func backendGating(g family.Gating) (backend.Gating, error) {
	switch g {
	case family.GatingDefault, family.GatingSoftmax:
		return backend.GatingSoftmax, nil
	case family.GatingSigmoid:
		return backend.GatingSigmoid, nil
	case family.GatingSoftmaxWeight:
		return backend.GatingSoftmaxTopK, nil
	}
	return 0, fmt.Errorf("expert gating function %d is not supported (want 1 softmax, 2 sigmoid or 3 softmax over the top k)", int(g))
}

// Validate rejects shapes the forward pass cannot run.
func (hp HParams) Validate() error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	switch {
	case hp.Layers <= 0 || hp.Embd <= 0 || hp.Heads <= 0 || hp.KVHeads <= 0 || hp.FF <= 0 || hp.Vocab <= 0:
		return fmt.Errorf("model %s: layers %d, embd %d, heads %d, kv heads %d, ff %d, vocab %d must all be positive",
			hp.Arch, hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.FF, hp.Vocab)
	case hp.Heads%hp.KVHeads != 0:
		return fmt.Errorf("model %s: %d heads is not a multiple of %d kv heads", hp.Arch, hp.Heads, hp.KVHeads)
	case hp.HeadDim <= 0 || hp.HeadDim%8 != 0 || hp.HeadDim > 512:
		return fmt.Errorf("model %s: head dim %d not supported (multiple of 8, at most 512)", hp.Arch, hp.HeadDim)
	case hp.RopeDims <= 0 || hp.RopeDims > hp.HeadDim || hp.RopeDims%2 != 0:
		return fmt.Errorf("model %s: rope dims %d invalid for head dim %d", hp.Arch, hp.RopeDims, hp.HeadDim)
	case hp.RopeBase <= 0 || math.IsNaN(float64(hp.RopeBase)):
		return fmt.Errorf("model %s: rope base %g invalid", hp.Arch, hp.RopeBase)
	case hp.AttnScale < 0 || !finite(hp.AttnScale):
		return fmt.Errorf("model %s: attention scale %g invalid", hp.Arch, hp.AttnScale)
	case hp.AttnSoftcap < 0 || !finite(hp.AttnSoftcap) || hp.FinalSoftcap < 0 || !finite(hp.FinalSoftcap):
		return fmt.Errorf("model %s: soft-caps %g (attention) and %g (final) must be finite and ≥ 0", hp.Arch, hp.AttnSoftcap, hp.FinalSoftcap)
	case hp.Window < 0 || hp.SWAPattern < 0:
		return fmt.Errorf("model %s: sliding window %d (pattern %d) invalid", hp.Arch, hp.Window, hp.SWAPattern)
	case hp.RopeAttnFactor < 0 || !finite(hp.RopeAttnFactor):
		return fmt.Errorf("model %s: rope attention factor %g invalid", hp.Arch, hp.RopeAttnFactor)
	case hp.RopeExtFactor != 0 && (hp.RopeExtFactor < 0 || !finite(hp.RopeExtFactor) || !finite(hp.RopeBetaFast) || !finite(hp.RopeBetaSlow) ||
		hp.RopeBetaFast <= 0 || hp.RopeBetaSlow <= 0 || hp.RopeCtxOrig <= 0):
		return fmt.Errorf("model %s: YaRN ext factor %g, betas %g and %g, original context %d invalid",
			hp.Arch, hp.RopeExtFactor, hp.RopeBetaFast, hp.RopeBetaSlow, hp.RopeCtxOrig)
	case hp.LayerKVHeads != nil && len(hp.LayerKVHeads) != hp.Layers || hp.LayerFF != nil && len(hp.LayerFF) != hp.Layers:
		return fmt.Errorf("model %s: per-layer kv heads (%d) or feed-forward widths (%d) for %d layers", hp.Arch, len(hp.LayerKVHeads), len(hp.LayerFF), hp.Layers)
	case hp.SharedKVLayers < 0 || hp.SharedKVLayers >= hp.Layers:
		return fmt.Errorf("model %s: %d layers share K/V of %d", hp.Arch, hp.SharedKVLayers, hp.Layers)
	case hp.PerLayerEmbd < 0:
		return fmt.Errorf("model %s: per-layer embedding width %d invalid", hp.Arch, hp.PerLayerEmbd)
	case hp.Experts < 0 || hp.Experts > 0 && (hp.ExpertsUsed <= 0 || hp.ExpertsUsed > hp.Experts):
		return fmt.Errorf("model %s: %d experts with %d used per token: want 1 ≤ used ≤ experts", hp.Arch, hp.Experts, hp.ExpertsUsed)
	case hp.Experts > 0 && (hp.ExpertFF <= 0 || hp.SharedFF < 0):
		return fmt.Errorf("model %s: expert width %d (shared %d) invalid", hp.Arch, hp.ExpertFF, hp.SharedFF)
	case hp.ExpertScale < 0 || !finite(hp.ExpertScale):
		return fmt.Errorf("model %s: expert weights scale %g invalid", hp.Arch, hp.ExpertScale)
	}
	for il := range hp.Layers {
		d, kvh, ff, rd := hp.HeadDimOf(il), hp.KVHeadsOf(il), hp.FFOf(il), hp.RopeDimsOf(il)
		switch {
		case d <= 0 || d%8 != 0 || d > 512:
			return fmt.Errorf("model %s: layer %d: head dim %d not supported (multiple of 8, at most 512)", hp.Arch, il, d)
		case kvh <= 0 || hp.Heads%kvh != 0:
			return fmt.Errorf("model %s: layer %d: %d heads is not a multiple of %d kv heads", hp.Arch, il, hp.Heads, kvh)
		case ff <= 0:
			return fmt.Errorf("model %s: layer %d: feed-forward width %d must be positive", hp.Arch, il, ff)
		case rd <= 0 || rd > d || rd%2 != 0:
			return fmt.Errorf("model %s: layer %d: rope dims %d invalid for head dim %d", hp.Arch, il, rd, d)
		case hp.KVSource(il) < 0:
			return fmt.Errorf("model %s: layer %d shares K/V but no earlier layer of its kind stores them", hp.Arch, il)
		}
	}
	return nil
}

// perLayer reads key as one value or one per layer: the first value and,
// for an array whose values differ, the array. required: absent is an
// error; else (0, nil).
func perLayer(f *gguf.File, key string, layers int, required bool) (int, []int, error) {
	if v, ok := f.Uint(key); ok {
		if v == 0 || v > 1<<24 {
			return 0, nil, fmt.Errorf("metadata %s = %d is out of range", key, v)
		}
		return int(v), nil, nil
	}
	if a, ok := f.Int32s(key); ok {
		if len(a) != layers {
			return 0, nil, fmt.Errorf("metadata %s has %d values for %d layers", key, len(a), layers)
		}
		out, same := make([]int, layers), true
		for i, v := range a {
			if v <= 0 || v > 1<<24 {
				return 0, nil, fmt.Errorf("metadata %s[%d] = %d is out of range", key, i, v)
			}
			out[i], same = int(v), same && v == a[0]
		}
		if same {
			return out[0], nil, nil
		}
		return out[0], out, nil
	}
	if required {
		return 0, nil, fmt.Errorf("metadata %s is missing", key)
	}
	return 0, nil, nil
}

// QDim is the width of the query projection (all heads).
func (hp HParams) QDim() int { return hp.Heads * hp.HeadDim }

// KVDim is the width of the key or value projection (all kv heads).
func (hp HParams) KVDim() int { return hp.KVHeads * hp.HeadDim }
