// Package family describes the model architectures the engine runs, one
// Family per GGUF general.architecture: hyper-parameter traits, quirks,
// tensor layout, fallback chat format, tokenizer overrides and the defaults
// of synthetic models. It is data only and imports nothing of the engine, so
// engine/model (forward pass, loader), engine/chat, engine/tokenizer,
// engine/synth and engine/estimate all read the same descriptor. The
// families the engine ships are registered in builtin.go; a test may
// Register one of its own.
package family

import (
	"fmt"
	"strings"
	"sync"
)

// Family is everything the engine knows of one architecture beyond the
// sizes a file gives.
type Family struct {
	Name string // general.architecture

	// Traits are the hyper-parameters the architecture fixes or defaults
	// before the file's keys are read.
	Traits Traits
	// Quirks are where llama.cpp departs from the file for this family.
	Quirks Quirks
	// Tensors is how the family's tensor table departs from llama's.
	Tensors Layout
	// Chat is the built-in chat format for files without a usable
	// template.
	Chat Chat
	// Vocab are the tokenizer attribute overrides llama.cpp applies to this
	// family's files.
	Vocab Vocab
	// Synth are the defaults of a synthetic model of this family.
	Synth Synth
}

// Traits are the per-architecture fields of engine/model's HParams.
type Traits struct {
	RopeNeox  bool // RoPE rotates (x[i], x[i+d/2]); else adjacent pairs (llama's converters permute Q/K)
	QKVBias   bool // q, k and v projections have biases
	QKNorm    bool // per-head RMSNorm of q and k before RoPE (attn_q_norm, attn_k_norm)
	PostNorms bool // post_attention_norm and post_ffw_norm on the blocks' outputs before the residual add
	GeluFFN   bool // GELU-tanh gated feed-forward instead of SwiGLU
	EmbdScale bool // embeddings multiplied by sqrt(n_embd)
	// AttnSoftcap and FinalSoftcap are the default caps of attention and
	// output logits (0 = none); only a family with a default reads the
	// file's *_logit_softcapping, as llama.cpp does.
	AttnSoftcap, FinalSoftcap float32
	// SWAPattern p says which layers use the sliding window: 0, every
	// layer; else layer il iff il%p < p-1.
	SWAPattern int
	// Window is the sliding window when the file gives none (0 = none).
	Window int
	// RopeBaseLocal is the RoPE base of sliding-window layers when the file
	// does not say (0 = the file's base).
	RopeBaseLocal float32
	// AttnScale fixes the q·k scale whatever the file says (0 = the file's
	// attention.scale, else 1/sqrt(head dim)); Gemma 4 scales by 1.
	AttnScale float32
	// VNorm: each head of v is RMS-normalised without a weight before it
	// is cached (Gemma 4).
	VNorm bool
	// RopeFreqsGlobal: rope_freqs applies to the global layers only
	// (Gemma 4's proportional RoPE); sliding layers rotate plainly.
	RopeFreqsGlobal bool
	// Experts are the mixture-of-experts defaults, used by the files of the
	// family that have experts (expert_count > 0).
	Experts Experts
}

// Gating is how a router turns logits into expert weights, numbered as
// llama.cpp's expert_gating_func key.
type Gating int

const (
	GatingDefault       Gating = iota // the family's (softmax where it says nothing)
	GatingSoftmax                     // softmax over all experts, then the top k
	GatingSigmoid                     // sigmoid per expert, then the top k
	GatingSoftmaxWeight               // the top k logits, then a softmax over them
)

// ExpertAct is the gate function of the experts' feed-forward.
type ExpertAct int

const (
	ExpertActFamily     ExpertAct = iota // the family's dense activation (SwiGLU, or GELU where GeluFFN)
	ExpertSwiGLUClamped                  // gpt-oss's clamped SwiGLU (ClampAlpha, ClampLimit)
)

// Experts are a family's mixture-of-experts defaults; a file's
// expert_gating_func and expert_weights_norm keys, where present, override
// Gating and Norm.
type Experts struct {
	Gating Gating
	Norm   bool // divide the chosen experts' weights by their sum
	// FFPerUsed: without expert_feed_forward_length an expert's width is
	// feed_forward_length / expert_used_count (Qwen3-MoE), else
	// feed_forward_length itself (Mixtral).
	FFPerUsed bool
	Act       ExpertAct
	// ClampAlpha and ClampLimit are the clamped SwiGLU's constants.
	ClampAlpha, ClampLimit float32
}

// Quirks are the places llama.cpp overrides what the file says.
type Quirks struct {
	// IgnoresWindow: the file's sliding_window is not applied.
	IgnoresWindow bool
	// TiedOutput: the output matrix is token_embd even where the file has
	// an output.weight.
	TiedOutput bool
	// WideScaleLayers: models of exactly this many layers scale q·k by
	// 1/sqrt(n_embd/n_head) instead of 1/sqrt(head_dim) (llama.cpp
	// recognises Gemma's 27B models by layer count); 0 = none.
	WideScaleLayers int
}

// RopeFactors says which per-pair RoPE divisor tensors a family's files may
// carry.
type RopeFactors int

const (
	NoRopeFactors RopeFactors = iota
	RopeFreqs                 // rope_freqs (Llama 3.1, where converters write it)
	RopeLongShort             // rope_factors_long and rope_factors_short (LongRoPE)
)

// Layout is how a family's tensor table departs from llama.cpp's llama
// one. Biases, q/k norms and post norms follow the Traits.
type Layout struct {
	RopeFactors RopeFactors
	// FusedQKV: attn_qkv holds [q | k | v] rows instead of attn_q, attn_k,
	// attn_v. llama.cpp finds k at row n_embd, so the head dim is
	// n_embd/n_head.
	FusedQKV bool
	// FusedGateUp: ffn_up holds [gate | up] rows and there is no ffn_gate.
	FusedGateUp bool
	// OptionalV: a layer without attn_v takes v from k's projection
	// (Gemma 4's global layers in its larger sizes).
	OptionalV bool
	// LayerOutScale: blk.N.layer_output_scale, one float multiplying the
	// residual stream after the block (Gemma 4), optional.
	LayerOutScale bool
	// PerLayerInputs: per-layer token embeddings and their projection
	// (Gemma 4's E models), present when the file gives
	// embedding_length_per_layer_input.
	PerLayerInputs bool
	// The layout of the experts, in files with expert_count > 0 (besides
	// ffn_gate_inp and ffn_{gate,up,down}_exps, which every such file has;
	// shared experts ffn_*_shexp where expert_shared_feed_forward_length is
	// set):
	//
	// FusedGateUpExperts: ffn_gate_up_exps holds each expert's [gate | up]
	// rows instead of ffn_gate_exps and ffn_up_exps.
	FusedGateUpExperts bool
	// ExpertBiases: the router and the expert matrices have .bias tensors.
	ExpertBiases bool
	// DenseBesideExperts: the blocks keep the dense ffn_gate/up/down beside
	// the experts, whose outputs are added.
	DenseBesideExperts bool
	// SharedExpertGate: ffn_gate_inp_shexp scales the shared experts'
	// output by a sigmoid per token.
	SharedExpertGate bool

	// AttnOutputBias: attn_output has a .bias (gpt-oss).
	AttnOutputBias bool
	// AttnSinks: attn_sinks holds one learned logit per query head that
	// joins the softmax's denominator (gpt-oss).
	AttnSinks bool
	// FFNNormPostAttention: the feed-forward's pre-norm is stored as
	// post_attention_norm, not ffn_norm (gpt-oss's converter names it so).
	FFNNormPostAttention bool
	// ExpertsOwnNorms (Gemma 4): the dense feed-forward beside the experts
	// has its own post norm (post_ffw_norm_1), the experts a pre and post
	// norm (pre_ffw_norm_2, post_ffw_norm_2), the router reads the block
	// input RMS-normalised by ffn_gate_inp.scale and 1/sqrt(n_embd), and
	// ffn_down_exps.scale scales each chosen expert's weight.
	ExpertsOwnNorms bool
}

// Chat names engine/chat's built-in fallback formats for the family.
type Chat struct {
	Template string // format used when the vocabulary gives no hint
	// InstTemplate replaces Template when "[INST]" is a single token of
	// the vocabulary (Mistral's files say arch llama, as Llama 2's do; only
	// the vocabulary tells them apart); "" = Template.
	InstTemplate string
}

// Vocab are tokenizer attribute overrides that llama.cpp applies to the
// family's files, found by general.name as llama.cpp finds them (not by
// architecture).
type Vocab struct {
	Names []string // substrings of the lower-cased general.name that select the overrides
	// RStripSpecials: every control, user-defined and unknown token strips
	// the spaces on its right, except those in KeepRight.
	RStripSpecials bool
	RStrip         []string // tokens that strip the spaces on their right
	KeepRight      []string // tokens that do not
}

// Synth are the defaults engine/synth gives a synthetic model of the
// family; real files state their own values.
type Synth struct {
	RopeBase float32
	RMSEps   float32
	Window   int  // sliding window written when none is asked for (0 = none)
	Untied   bool // separate output.weight by default
	// Experts, ExpertsUsed and ExpertFF are the expert count, the experts
	// chosen per token and an expert's width written when none are asked
	// for (0 = a dense model).
	Experts, ExpertsUsed, ExpertFF int
}

var (
	mu     sync.RWMutex
	byName = map[string]*Family{}
	order  []string
)

// Register adds f to the families the engine runs. Registering a name twice,
// or an empty one, is a programming error and panics.
func Register(f Family) {
	mu.Lock()
	defer mu.Unlock()
	if f.Name == "" || f.Name != strings.ToLower(f.Name) {
		panic(fmt.Sprintf("family: invalid name %q (want lower case, not empty)", f.Name))
	}
	if _, dup := byName[f.Name]; dup {
		panic(fmt.Sprintf("family: %q registered twice", f.Name))
	}
	byName[f.Name] = &f
	order = append(order, f.Name)
}

// Lookup returns the family of general.architecture arch.
func Lookup(arch string) (Family, bool) {
	mu.RLock()
	defer mu.RUnlock()
	if f, ok := byName[arch]; ok {
		return *f, true
	}
	return Family{}, false
}

// Names lists the registered families in registration order.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return append([]string(nil), order...)
}

// All lists the registered families in registration order.
func All() []Family {
	mu.RLock()
	defer mu.RUnlock()
	all := make([]Family, len(order))
	for i, n := range order {
		all[i] = *byName[n]
	}
	return all
}

// List is names as "a, b or c", for messages.
func List(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
