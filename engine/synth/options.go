// Package synth writes random-weight GGUF models with real tokenizers, in
// the layout llama.cpp loads (every family of engine/family, with the
// tensor tables of engine/model). They stand in
// for real models of any size in tests and benchmarks: same shapes, same
// tensor types, same code paths, no downloads.
package synth

import (
	"fmt"
	"math"
	"strings"

	"nibble/engine/family"
	"nibble/engine/ggml"
)

// Options describe the model to generate.
type Options struct {
	Arch                             string // a registered family (engine/family)
	Layers, Embd, Heads, KVHeads, FF int
	// HeadDim is written as attention.key_length and value_length; 0 means
	// Embd/Heads (Qwen3 and Gemma models often differ).
	HeadDim int
	// Window is the sliding window (attention.sliding_window); 0 means the
	// family's usual (family.Synth.Window: 4096 for Gemma 2, on its even
	// layers; 1024 for Gemma 3, 5 of every 6 layers; none for the others,
	// every layer where set). A family that ignores the window (Phi-3) gets
	// 0, the key llama.cpp requires, and refuses another.
	Window    int
	VocabFrom string    // GGUF whose tokenizer.* metadata is copied
	VocabData []byte    // or the bytes of such a GGUF (takes precedence)
	Type      ggml.Type // of 2D weights: F16, Q8_0 or Q4_0
	Seed      uint64
	Ctx       int     // context length; 0 means 4096
	RopeBase  float32 // 0 means the family's (family.Synth.RopeBase)
	// TiedOutput leaves out output.weight so logits use token_embd. A bool
	// cannot say "unset", so Generate takes it as given; DefaultOptions and
	// the CLI pick the family's default (family.Synth.Untied: qwen2 and
	// phi3); a family whose output is always tied (Gemma) is tied.
	TiedOutput bool
	// LongRoPEOrigCtx, when positive (families with LongRoPE factors: phi3), makes a LongRoPE model
	// trained at this context and extended to Ctx: rope_factors_short
	// (about 1) and rope_factors_long (about 4) random per pair,
	// rope.scaling.original_context_length and the attention factor
	// sqrt(1 + ln(Ctx/orig)/ln(orig)) that Phi-3's converter writes.
	LongRoPEOrigCtx int
	// AttnScale, when positive, is written as <arch>.attention.scale: the
	// factor on q·k in place of 1/sqrt(head dim) (1.0 as in some Gemma models).
	AttnScale float32
	// KeyOutliers channels of every KV head have their attn_k rows scaled
	// by KeyOutlierGain, the outlier key channels of real models that make
	// per-group int4 K lose precision.
	KeyOutliers    int
	KeyOutlierGain float32
	// Experts > 0 writes a mixture of experts: ExpertsUsed chosen per token
	// of Experts, each ExpertFF wide (expert_feed_forward_length where the
	// family reads it; Mixtral's experts are FF wide), with a router
	// (ffn_gate_inp, F32 as llama.cpp's quantizer keeps it) and the
	// experts' 3-D weights in place of the dense feed-forward.
	Experts, ExpertsUsed, ExpertFF int
	// SharedFF > 0 adds shared experts of that width (ffn_*_shexp,
	// expert_shared_feed_forward_length) to a mixture of experts.
	SharedFF int
	// ExpertType is the type of the experts' 3-D weights; 0 (F32's value,
	// which synth never writes) means Type. gpt-oss's are MXFP4, as its
	// checkpoints and llama.cpp's converter have them.
	ExpertType ggml.Type
	// YaRNFactor > 0 writes YaRN RoPE scaling (rope.scaling.type yarn,
	// .factor, .original_context_length YaRNOrigCtx), as gpt-oss's files
	// have it (factor 32 over 4096 positions).
	YaRNFactor  float32
	YaRNOrigCtx int
	// Gemma4 shapes a gemma4 model beyond the common sizes (HeadDim is
	// then the sliding layers' head dim).
	Gemma4   Gemma4Options
	Progress func(done, total int64) // bytes of tensor data written; may be nil
}

// Gemma4Options are the shapes of a synthetic Gemma 4 (arch gemma4). The
// zero value is an E model's: every fifth layer global with heads twice as
// wide as the sliding layers', no sharing and no per-layer inputs unless
// asked for.
type Gemma4Options struct {
	// GlobalEvery p makes layer il global iff il%p == p−1 (0: 5, as E2B);
	// with SharedKVLayers the last layer that stores K/V must be global
	// and the one before it sliding (llama.cpp's rule for which layer a
	// shared one reads then agrees with transformers').
	GlobalEvery int
	// HeadDimGlobal is the global layers' head dim (0: twice HeadDim).
	HeadDimGlobal int
	// KVHeadsGlobal is the global layers' kv heads (0: KVHeads), written as
	// a per-layer head_count_kv.
	KVHeadsGlobal int
	// SharedKVLayers: the last that many layers read an earlier layer's
	// cache and have no K/V weights.
	SharedKVLayers int
	// PerLayerEmbd is the per-layer input width (0: none).
	PerLayerEmbd int
	// GlobalVFromK leaves attn_v out of the global layers: v is k's
	// projection (the 31B and 26B-A4B models).
	GlobalVFromK bool
	// PartialRotary is the fraction of a global head that RoPE rotates
	// (proportional RoPE; 0: 0.25, the real models').
	PartialRotary float32
}

func (g Gemma4Options) globalEvery() int {
	if g.GlobalEvery > 0 {
		return g.GlobalEvery
	}
	return 5
}

func (g Gemma4Options) partialRotary() float32 {
	if g.PartialRotary > 0 {
		return g.PartialRotary
	}
	return 0.25
}

// gemma4 reports whether o writes a gemma4 model.
func (o *Options) gemma4() bool { return o.Arch == "gemma4" }

// headDimGlobal is a gemma4 model's global head dim.
func (o *Options) headDimGlobal() int {
	if o.Gemma4.HeadDimGlobal > 0 {
		return o.Gemma4.HeadDimGlobal
	}
	return 2 * o.headDim()
}

// slidingLayers is a gemma4 model's sliding_window_pattern.
func (o *Options) slidingLayers() []bool {
	p := o.Gemma4.globalEvery()
	s := make([]bool, o.Layers)
	for il := range s {
		s[il] = il%p != p-1
	}
	return s
}

// ropeFreqs are a gemma4 model's rope_freqs: proportional RoPE on the
// global layers as llama.cpp's converter writes it, 1 for the pairs it
// rotates and 1e30 (no rotation) for the rest.
func (o *Options) ropeFreqs() []float32 {
	hd := o.headDimGlobal()
	rot := int(float32(hd) * o.Gemma4.partialRotary() / 2)
	f := make([]float32, hd/2)
	for j := range f {
		f[j] = 1
		if j >= rot {
			f[j] = 1e30
		}
	}
	return f
}

// checkGemma4 validates the Gemma 4 options.
func (o *Options) checkGemma4() error {
	g := o.Gemma4
	if !o.gemma4() {
		if g != (Gemma4Options{}) {
			return fmt.Errorf("synth: Gemma 4 options for arch %s", o.Arch)
		}
		return nil
	}
	hd, kvh := o.headDimGlobal(), max(g.KVHeadsGlobal, o.KVHeads)
	switch {
	case g.GlobalEvery < 0 || g.GlobalEvery > o.Layers:
		return fmt.Errorf("synth: gemma4 global layer period %d: want 1..%d", g.GlobalEvery, o.Layers)
	case hd%8 != 0 || hd < 8 || hd > 512:
		return fmt.Errorf("synth: gemma4 global head dim %d is not a multiple of 8 in [8, 512]", hd)
	case g.KVHeadsGlobal < 0 || o.Heads%kvh != 0:
		return fmt.Errorf("synth: gemma4 global kv heads %d do not divide %d heads", g.KVHeadsGlobal, o.Heads)
	case g.SharedKVLayers < 0 || g.SharedKVLayers > o.Layers-2:
		return fmt.Errorf("synth: gemma4 shared layers %d: want 0..%d", g.SharedKVLayers, o.Layers-2)
	case g.PerLayerEmbd < 0 || g.PerLayerEmbd > maxEmbd:
		return fmt.Errorf("synth: gemma4 per-layer width %d: want 0..%d", g.PerLayerEmbd, maxEmbd)
	case !(g.PartialRotary >= 0 && g.PartialRotary <= 1):
		return fmt.Errorf("synth: gemma4 partial rotary factor %g: want [0, 1]", g.PartialRotary)
	}
	if n := o.Layers - g.SharedKVLayers; g.SharedKVLayers > 0 {
		sl := o.slidingLayers()
		if sl[n-1] || !sl[n-2] {
			return fmt.Errorf("synth: gemma4 with %d shared layers: layer %d (the last that stores K/V) must be global and layer %d sliding; choose the period so", g.SharedKVLayers, n-1, n-2)
		}
	}
	return nil
}

// Mixtral is the name synth and the CLI give a llama model with experts
// (Mixtral's files say llama).
const Mixtral = "mixtral"

// GptOss is the CLI's name for the gpt-oss family (its files say gpt-oss).
const GptOss = "gptoss"

// DefaultOptions returns the per-architecture defaults; callers fill in the
// sizes, VocabFrom and Seed.
func DefaultOptions(arch string) Options {
	if arch == Mixtral {
		// Mixtral 8x7B's routing: 8 experts, 2 per token.
		o := DefaultOptions("llama")
		o.Experts, o.ExpertsUsed = 8, 2
		return o
	}
	if arch == GptOss {
		arch = "gpt-oss"
	}
	o := Options{Arch: arch, Type: ggml.F16, Ctx: 4096}
	if arch == "gpt-oss" {
		o.ExpertType, o.YaRNFactor, o.YaRNOrigCtx = ggml.MXFP4, 32, 4096
	}
	fam, _ := family.Lookup(arch)
	o.RopeBase = fam.Synth.RopeBase
	o.TiedOutput = !fam.Synth.Untied
	o.Experts, o.ExpertsUsed, o.ExpertFF = fam.Synth.Experts, fam.Synth.ExpertsUsed, fam.Synth.ExpertFF
	return o
}

// Archs are the architectures Generate writes: the families registered
// when the program starts (mixtral is llama with experts: DefaultOptions).
var Archs = family.Names()

// longRoPEAttnFactor is the attention factor of a LongRoPE model (Phi-3's
// converter and transformers compute it alike).
func (o *Options) longRoPEAttnFactor() float32 {
	orig := float64(o.LongRoPEOrigCtx)
	return float32(math.Sqrt(1 + math.Log(float64(o.Ctx)/orig)/math.Log(orig)))
}

// headDim is HeadDim or its default.
func (o *Options) headDim() int {
	if o.HeadDim > 0 {
		return o.HeadDim
	}
	return o.Embd / o.Heads
}

// Limits keep a typo from asking for a petabyte file.
const (
	maxLayers = 1024
	maxEmbd   = 65536
	maxFF     = 262144
	maxHeads  = 1024
	maxCtx    = 1 << 24
	maxVocab  = 1 << 22
)

// check validates o and fills the defaults of Ctx and RopeBase.
func (o *Options) check() error {
	fam, ok := family.Lookup(o.Arch)
	if !ok {
		return fmt.Errorf("synth: arch %q: want one of %s", o.Arch, strings.Join(family.Names(), ", "))
	}
	if o.Ctx == 0 {
		o.Ctx = 4096
	}
	if o.RopeBase == 0 {
		o.RopeBase = fam.Synth.RopeBase
	}
	if o.Window == 0 {
		o.Window = fam.Synth.Window
	}
	if fam.Quirks.TiedOutput {
		o.TiedOutput = true // llama.cpp's loader has no output.weight for it
	}
	bounds := []struct {
		name   string
		v, max int
	}{
		{"layers", o.Layers, maxLayers}, {"embd", o.Embd, maxEmbd}, {"heads", o.Heads, maxHeads},
		{"kv-heads", o.KVHeads, maxHeads}, {"ff", o.FF, maxFF}, {"ctx", o.Ctx, maxCtx},
	}
	for _, b := range bounds {
		if b.v < 1 || b.v > b.max {
			return fmt.Errorf("synth: %s = %d: want 1..%d", b.name, b.v, b.max)
		}
	}
	if o.HeadDim == 0 && o.Embd%o.Heads != 0 {
		return fmt.Errorf("synth: embd %d is not divisible by heads %d (or give a head dim)", o.Embd, o.Heads)
	}
	if o.Heads%o.KVHeads != 0 {
		return fmt.Errorf("synth: heads %d is not divisible by kv-heads %d", o.Heads, o.KVHeads)
	}
	if hd := o.headDim(); hd%8 != 0 || hd < 8 || hd > 512 {
		return fmt.Errorf("synth: head dim %d is not a multiple of 8 in [8, 512]", hd)
	}
	if o.HeadDim != 0 && fam.Tensors.FusedQKV && o.HeadDim != o.Embd/o.Heads {
		return fmt.Errorf("synth: %s has head dim embd/heads = %d, not %d", o.Arch, o.Embd/o.Heads, o.HeadDim)
	}
	if o.Window < 0 || o.Window > maxCtx || o.Window > 0 && fam.Quirks.IgnoresWindow {
		return fmt.Errorf("synth: window %d: want 0..%d (0 for %s, whose window llama.cpp ignores)", o.Window, maxCtx, o.Arch)
	}
	switch o.Type {
	case ggml.F16:
	case ggml.Q8_0, ggml.Q4_0:
		if o.Embd%32 != 0 || o.FF%32 != 0 || o.Experts > 0 && o.ExpertFF%32 != 0 {
			return fmt.Errorf("synth: %s needs embd, ff and expert ff multiples of 32 (got embd %d, ff %d, expert ff %d)", o.Type, o.Embd, o.FF, o.ExpertFF)
		}
	default:
		// F32 is refused too: it is Type's zero value, so most likely unset.
		return fmt.Errorf("synth: weight type %s: want F16, Q8_0 or Q4_0", o.Type)
	}
	if !(o.RopeBase > 0) {
		return fmt.Errorf("synth: rope base %g must be positive", o.RopeBase)
	}
	if o.AttnScale < 0 || math.IsNaN(float64(o.AttnScale)) || math.IsInf(float64(o.AttnScale), 0) {
		return fmt.Errorf("synth: attention scale %g: want a finite value ≥ 0 (0 is 1/sqrt(head dim))", o.AttnScale)
	}
	if o.KeyOutliers < 0 || o.KeyOutliers > o.headDim() {
		return fmt.Errorf("synth: key outliers %d: want 0..%d (the head dim)", o.KeyOutliers, o.headDim())
	}
	if o.LongRoPEOrigCtx != 0 && (fam.Tensors.RopeFactors != family.RopeLongShort || o.LongRoPEOrigCtx < 2 || o.LongRoPEOrigCtx >= o.Ctx) {
		return fmt.Errorf("synth: LongRoPE original context %d: only for a family with LongRoPE factors, in [2, ctx %d)", o.LongRoPEOrigCtx, o.Ctx)
	}
	if o.KeyOutliers > 0 && fam.Tensors.FusedQKV {
		return fmt.Errorf("synth: key outliers need a separate attn_k, which %s fuses into attn_qkv", o.Arch)
	}
	if o.KeyOutliers > 0 && !(o.KeyOutlierGain > 0 && o.KeyOutlierGain <= 1000) {
		return fmt.Errorf("synth: key outlier gain %g: want (0, 1000]", o.KeyOutlierGain)
	}
	if err := o.checkExperts(fam); err != nil {
		return err
	}
	if o.YaRNFactor != 0 && (!(o.YaRNFactor >= 1 && o.YaRNFactor <= 1024) || o.YaRNOrigCtx < 1 || o.YaRNOrigCtx > maxCtx) {
		return fmt.Errorf("synth: YaRN factor %g over %d positions: want a factor in [1, 1024] and a positive original context", o.YaRNFactor, o.YaRNOrigCtx)
	}
	switch o.ExpertType {
	case 0, o.Type:
	case ggml.F16, ggml.Q8_0, ggml.Q4_0, ggml.MXFP4:
		if o.Experts == 0 || o.Embd%32 != 0 || o.ExpertFF%32 != 0 {
			return fmt.Errorf("synth: expert type %s needs experts, embd and expert ff multiples of 32 (got %d experts, embd %d, expert ff %d)",
				o.ExpertType, o.Experts, o.Embd, o.ExpertFF)
		}
	default:
		return fmt.Errorf("synth: expert weight type %s: want F16, Q8_0, Q4_0 or MXFP4", o.ExpertType)
	}
	if o.VocabFrom == "" && o.VocabData == nil {
		return fmt.Errorf("synth: VocabFrom (a GGUF with tokenizer metadata) is required")
	}
	return o.checkGemma4()
}

// maxExperts is llama.cpp's LLAMA_MAX_EXPERTS.
const maxExperts = 512

// checkExperts validates the experts of o, filling ExpertFF where the
// family's experts are FF wide.
func (o *Options) checkExperts(fam family.Family) error {
	if o.Experts == 0 && o.ExpertsUsed == 0 && o.SharedFF == 0 {
		return nil
	}
	if o.SharedFF < 0 || o.SharedFF > maxFF || o.SharedFF%32 != 0 && o.Type != ggml.F16 {
		return fmt.Errorf("synth: shared expert ff = %d: want 0..%d (a multiple of 32 for %s)", o.SharedFF, maxFF, o.Type)
	}
	if o.Experts < 1 || o.Experts > maxExperts || o.ExpertsUsed < 1 || o.ExpertsUsed > o.Experts {
		return fmt.Errorf("synth: %d experts, %d used per token: want 1 ≤ used ≤ experts ≤ %d", o.Experts, o.ExpertsUsed, maxExperts)
	}
	if !statesExpertFF(fam) {
		// llama.cpp reads no expert width for this family: its experts are
		// feed_forward_length wide.
		if o.ExpertFF != 0 && o.ExpertFF != o.FF {
			return fmt.Errorf("synth: %s experts are ff (%d) wide, not %d", o.Arch, o.FF, o.ExpertFF)
		}
		o.ExpertFF = o.FF
	}
	if o.ExpertFF < 1 || o.ExpertFF > maxFF {
		return fmt.Errorf("synth: expert ff = %d: want 1..%d", o.ExpertFF, maxFF)
	}
	return nil
}

// statesExpertFF reports whether the family's files state the experts'
// width (expert_feed_forward_length): every converter's but Mixtral's
// (llama), whose experts are feed_forward_length wide.
func statesExpertFF(fam family.Family) bool {
	return fam.Traits.Experts.FFPerUsed || fam.Name != "llama"
}

// fileType is llama.cpp's general.file_type (enum llama_ftype).
func fileType(t, experts ggml.Type) uint32 {
	if experts == ggml.MXFP4 {
		return 38 // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
	}
	switch t {
	case ggml.F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case ggml.Q4_0:
		return 2 // LLAMA_FTYPE_MOSTLY_Q4_0
	default:
		return 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	}
}
