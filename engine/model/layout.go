package model

import (
	"fmt"

	"nibble/engine/backend"
	"nibble/engine/family"
)

// TensorKind says which weight of the model a tensor is.
type TensorKind int

const (
	RopeFreqs TensorKind = iota // Llama 3.1 per-pair RoPE divisors
	TokEmbd
	AttnNorm
	AttnQ
	AttnQBias
	AttnK
	AttnKBias
	AttnV
	AttnVBias
	AttnOutput
	FFNNorm
	FFNGate
	FFNUp
	FFNDown
	OutputNorm
	Output
	AttnQNorm         // per-head RMSNorm of q (Qwen3, Gemma 3), [head dim]
	AttnKNorm         // per-head RMSNorm of k
	AttnPostNorm      // Gemma's post_attention_norm
	FFNPostNorm       // Gemma's post_ffw_norm
	AttnQKV           // Phi-3's fused q|k|v projection, bound as three views
	FFNGateUp         // Phi-3's fused gate|up projection, bound as two views
	RopeFactorsLong   // Phi-3 LongRoPE per-pair divisors for long contexts
	RopeFactorsShort  // and for contexts within the trained one
	PerLayerTokEmbd   // Gemma 4: per-layer token embeddings, [layers·per-layer width, vocab]
	PerLayerModelProj // Gemma 4: the embeddings' projection to every layer's input, [embd, layers·width]
	PerLayerProjNorm  // Gemma 4: RMSNorm of each layer's slice of that projection, [width]
	PerLayerInpGate   // Gemma 4: a block's gate on its per-layer input, [embd, width]
	PerLayerProj      // Gemma 4: the gated input's projection back, [width, embd]
	PerLayerPostNorm  // Gemma 4: RMSNorm of that projection, [embd]
	LayerOutScale     // Gemma 4: one float scaling the residual stream after the block, read on the host

	// Mixture of experts: the router, the experts' 3-D weights (one matrix
	// per expert, stacked) and biases (one row per expert), shared experts.
	FFNGateInp        // router, [embd, experts]
	FFNGateInpBias    // [experts]
	FFNGateExps       // [embd, expert ff, experts]
	FFNUpExps         // [embd, expert ff, experts]
	FFNDownExps       // [expert ff, embd, experts]
	FFNGateUpExps     // each expert's [gate | up] rows, bound as two views
	FFNGateExpsBias   // [expert ff, experts]
	FFNUpExpsBias     // [expert ff, experts]
	FFNDownExpsBias   // [embd, experts]
	FFNGateUpExpsBias // [2·expert ff, experts], bound as two views
	FFNGateShexp      // shared experts, [embd, shared ff]
	FFNUpShexp        // [embd, shared ff]
	FFNDownShexp      // [shared ff, embd]
	FFNGateInpShexp   // the shared experts' sigmoid gate, [embd]

	AttnOutputBias   // gpt-oss's attn_output.bias, [embd]
	AttnSinks        // gpt-oss's attention sinks, one logit per query head
	FFNPostNorm1     // Gemma 4: post norm of the dense feed-forward beside the experts, [embd]
	FFNPreNorm2      // Gemma 4: the experts' input norm, [embd]
	FFNPostNorm2     // Gemma 4: the experts' output norm, [embd]
	FFNGateInpScale  // Gemma 4: the router input's per-channel factor, [embd]
	FFNDownExpsScale // Gemma 4: each expert's factor on its weight, [experts]
)

// IsNorm reports whether k is an RMSNorm weight.
func (k TensorKind) IsNorm() bool {
	switch k {
	case AttnNorm, FFNNorm, OutputNorm, AttnQNorm, AttnKNorm, AttnPostNorm, FFNPostNorm, PerLayerProjNorm, PerLayerPostNorm,
		FFNPostNorm1, FFNPreNorm2, FFNPostNorm2, FFNGateInpScale:
		return true
	}
	return false
}

// IsBias reports whether k is a projection bias.
func (k TensorKind) IsBias() bool {
	switch k {
	case AttnQBias, AttnKBias, AttnVBias, AttnOutputBias, FFNGateInpBias, FFNGateExpsBias, FFNUpExpsBias, FFNDownExpsBias, FFNGateUpExpsBias:
		return true
	}
	return false
}

// IsExperts reports whether k is the experts' stacked matrices.
func (k TensorKind) IsExperts() bool {
	switch k {
	case FFNGateExps, FFNUpExps, FFNDownExps, FFNGateUpExps:
		return true
	}
	return false
}

// IsRouter reports whether k is a router's weight (kept in F32 by
// llama.cpp's quantizer, as synth writes it).
func (k TensorKind) IsRouter() bool { return k == FFNGateInp || k == FFNGateInpShexp }

// IsRopeFactors reports whether k holds per-pair RoPE divisors, read on the
// host as floats rather than bound as a weight.
func (k TensorKind) IsRopeFactors() bool {
	return k == RopeFreqs || k == RopeFactorsLong || k == RopeFactorsShort
}

// TensorSpec is one tensor of a model file: the loader requires it with
// exactly these dims, and the writers of test and synthetic models declare
// it so.
type TensorSpec struct {
	Name     string
	Kind     TensorKind
	Layer    int      // block index, -1 outside the blocks
	Dims     []uint64 // GGUF order: ne[0] (the input features) first
	Optional bool     // bound only when present; writers leave it out
	// Views split a fused tensor by rows: each is bound as a weight of its
	// own at an offset into the tensor's bytes (no copy); the fused tensor
	// itself is not bound.
	Views []View
	// Cols, when set, reads the tensor as rows of Cols elements instead of
	// Dims[0] (a fused bias whose halves are split into views).
	Cols int
}

// View is rows [Row, Row+Rows) of a fused tensor, bound as a Kind weight.
type View struct {
	Kind      TensorKind
	Row, Rows int
}

// TensorLayout lists the tensors a model of hp has, as llama.cpp's loader
// for its architecture requires them: llama's table with the departures of
// the family's Layout (engine/family) and its traits (biases, q/k norms,
// post norms); an unregistered arch gets llama's. The order is the one synth
// and the test writers put in files; other writers order tensors
// differently, and the loader finds them by name.
func TensorLayout(hp HParams) []TensorSpec {
	fam, _ := family.Lookup(hp.Arch)
	lay := fam.Tensors
	if fam.Name == "" {
		lay = family.Layout{RopeFactors: family.RopeFreqs}
	}
	t := newTable(hp)
	switch lay.RopeFactors {
	case family.RopeFreqs:
		t.ropeFactors("rope_freqs.weight", RopeFreqs)
	case family.RopeLongShort:
		t.ropeFactors("rope_factors_long.weight", RopeFactorsLong)
		t.ropeFactors("rope_factors_short.weight", RopeFactorsShort)
	}
	t.embedding()
	if lay.PerLayerInputs && hp.PerLayerEmbd > 0 {
		w := uint64(hp.Layers * hp.PerLayerEmbd)
		t.add("per_layer_token_embd.weight", PerLayerTokEmbd, -1, w, uint64(hp.Vocab))
		t.add("per_layer_model_proj.weight", PerLayerModelProj, -1, t.embd(), w)
		t.add("per_layer_proj_norm.weight", PerLayerProjNorm, -1, uint64(hp.PerLayerEmbd))
	}
	for l := range hp.Layers {
		if lay.FusedQKV {
			t.fusedAttention(l)
		} else {
			t.attention(l, lay)
		}
		if hp.PostNorms {
			t.add("post_attention_norm.weight", AttnPostNorm, l, t.embd())
		}
		switch {
		case hp.MoE():
			t.experts(l, lay)
		case lay.FusedGateUp:
			t.fusedFeedForward(l)
		default:
			t.feedForward(l)
		}
		if hp.PostNorms {
			t.add("post_ffw_norm.weight", FFNPostNorm, l, t.embd())
		}
		if lay.PerLayerInputs && hp.PerLayerEmbd > 0 {
			w := uint64(hp.PerLayerEmbd)
			t.add("inp_gate.weight", PerLayerInpGate, l, t.embd(), w)
			t.add("proj.weight", PerLayerProj, l, w, t.embd())
			t.add("post_norm.weight", PerLayerPostNorm, l, t.embd())
		}
		if lay.LayerOutScale {
			t.add("layer_output_scale.weight", LayerOutScale, l, 1).Optional = true
		}
	}
	return t.output()
}

// table builds a TensorLayout: the family layouts add to it in file order.
type table struct {
	hp    HParams
	specs []TensorSpec
}

func newTable(hp HParams) *table { return &table{hp: hp, specs: make([]TensorSpec, 0, 4+hp.Layers*14)} }

func (t *table) add(name string, k TensorKind, layer int, dims ...uint64) *TensorSpec {
	if layer >= 0 {
		name = fmt.Sprintf("blk.%d.%s", layer, name)
	}
	t.specs = append(t.specs, TensorSpec{Name: name, Kind: k, Layer: layer, Dims: dims})
	return &t.specs[len(t.specs)-1]
}

// Sizes of hp as GGUF dims.
func (t *table) embd() uint64 { return uint64(t.hp.Embd) }
func (t *table) qDim() uint64 { return uint64(t.hp.QDim()) }
func (t *table) ff() uint64   { return uint64(t.hp.FF) }

// ropeFactors adds optional per-pair RoPE divisors.
func (t *table) ropeFactors(name string, k TensorKind) {
	t.add(name, k, -1, uint64(t.hp.RopeDims/2)).Optional = true
}

// embedding adds token_embd.
func (t *table) embedding() { t.add("token_embd.weight", TokEmbd, -1, t.embd(), uint64(t.hp.Vocab)) }

// attention adds a block's attention weights: norm, q/k/v (with biases
// where hp has them, each after its weight), q/k norms where hp has them,
// the output projection (and its bias) and the sinks where the family's
// layout has them, in the layer's head shape. A layer that reads another's
// K/V (Gemma 4) may leave out k, v and k's norm; a family whose v may come
// from k's projection (Layout.OptionalV) may leave out v.
func (t *table) attention(l int, lay family.Layout) {
	hp := t.hp
	hd := uint64(hp.HeadDimOf(l))
	q, kv := uint64(hp.Heads)*hd, uint64(hp.KVHeadsOf(l))*hd
	shares := hp.KVSource(l) != l
	t.add("attn_norm.weight", AttnNorm, l, t.embd())
	t.add("attn_q.weight", AttnQ, l, t.embd(), q)
	if hp.QKVBias {
		t.add("attn_q.bias", AttnQBias, l, q)
	}
	t.add("attn_k.weight", AttnK, l, t.embd(), kv).Optional = shares
	if hp.QKVBias {
		t.add("attn_k.bias", AttnKBias, l, kv)
	}
	t.add("attn_v.weight", AttnV, l, t.embd(), kv).Optional = shares || lay.OptionalV
	if hp.QKVBias {
		t.add("attn_v.bias", AttnVBias, l, kv)
	}
	if hp.QKNorm {
		t.add("attn_q_norm.weight", AttnQNorm, l, hd)
		t.add("attn_k_norm.weight", AttnKNorm, l, hd).Optional = shares
	}
	t.add("attn_output.weight", AttnOutput, l, q, t.embd())
	if lay.AttnOutputBias {
		t.add("attn_output.bias", AttnOutputBias, l, t.embd())
	}
	if lay.AttnSinks {
		t.add("attn_sinks.weight", AttnSinks, l, uint64(hp.Heads))
	}
}

// layout is the family's tensor layout (llama's for an unregistered arch).
func (t *table) layout() family.Layout {
	fam, _ := family.Lookup(t.hp.Arch)
	return fam.Tensors
}

// fusedAttention adds a block's attention with q, k and v in one attn_qkv
// of rows [q (n_head·hd) | k (n_kv·hd) | v (n_kv·hd)], bound as three views
// so the blocks see Wq, Wk and Wv as for llama and nothing is copied.
func (t *table) fusedAttention(l int) {
	q, kv := t.hp.QDim(), t.hp.KVDim()
	t.add("attn_norm.weight", AttnNorm, l, t.embd())
	t.add("attn_qkv.weight", AttnQKV, l, t.embd(), uint64(q+2*kv)).Views = []View{
		{AttnQ, 0, q}, {AttnK, q, kv}, {AttnV, q + kv, kv}}
	t.add("attn_output.weight", AttnOutput, l, t.qDim(), t.embd())
}

// feedForward adds a block's gated feed-forward weights.
func (t *table) feedForward(l int) {
	ff := uint64(t.hp.FFOf(l))
	t.add("ffn_norm.weight", FFNNorm, l, t.embd())
	t.add("ffn_gate.weight", FFNGate, l, t.embd(), ff)
	t.add("ffn_up.weight", FFNUp, l, t.embd(), ff)
	t.add("ffn_down.weight", FFNDown, l, ff, t.embd())
}

// fusedFeedForward adds a block's feed-forward with gate and up in one
// ffn_up of rows [gate (n_ff) | up (n_ff)], bound as two views.
func (t *table) fusedFeedForward(l int) {
	ff := t.hp.FF
	t.add("ffn_norm.weight", FFNNorm, l, t.embd())
	t.add("ffn_up.weight", FFNGateUp, l, t.embd(), uint64(2*ff)).Views = []View{{FFNGate, 0, ff}, {FFNUp, ff, ff}}
	t.add("ffn_down.weight", FFNDown, l, t.ff(), t.embd())
}

// experts adds a block's mixture-of-experts feed-forward: ffn_norm, the
// dense feed-forward where the family keeps one beside the experts, the
// router, the experts' stacked matrices (and biases where the family has
// them) and the shared experts where hp has them.
//
// A fused ffn_gate_up_exps of E experts, [gate_e | up_e] rows each, is
// bound as two views of 2E−1 half-experts of ExpertFF rows: rows [0,
// (2E−1)·ff) and [ff, 2E·ff). Half-expert 2e of the first is gate_e and of
// the second up_e, so the forward pass multiplies by them with the expert
// ids doubled, reading only the chosen experts' rows, and nothing is copied.
func (t *table) experts(l int, lay family.Layout) {
	hp := t.hp
	embd, eff, n := t.embd(), uint64(hp.ExpertFF), uint64(hp.Experts)
	if lay.FFNNormPostAttention {
		t.add("post_attention_norm.weight", FFNNorm, l, embd)
	} else {
		t.add("ffn_norm.weight", FFNNorm, l, embd)
	}
	if lay.DenseBesideExperts {
		ff := uint64(hp.FFOf(l))
		t.add("ffn_gate.weight", FFNGate, l, embd, ff)
		t.add("ffn_up.weight", FFNUp, l, embd, ff)
		t.add("ffn_down.weight", FFNDown, l, ff, embd)
	}
	if lay.ExpertsOwnNorms {
		t.add("post_ffw_norm_1.weight", FFNPostNorm1, l, embd)
		t.add("pre_ffw_norm_2.weight", FFNPreNorm2, l, embd)
		t.add("post_ffw_norm_2.weight", FFNPostNorm2, l, embd)
		t.add("ffn_gate_inp.scale", FFNGateInpScale, l, embd)
	}
	t.add("ffn_gate_inp.weight", FFNGateInp, l, embd, n)
	if lay.ExpertBiases {
		t.add("ffn_gate_inp.bias", FFNGateInpBias, l, n)
	}
	if lay.FusedGateUpExperts {
		half := (2*hp.Experts - 1) * hp.ExpertFF
		t.add("ffn_gate_up_exps.weight", FFNGateUpExps, l, embd, 2*eff, n).Views = []View{
			{FFNGateExps, 0, half}, {FFNUpExps, hp.ExpertFF, half}}
		if lay.ExpertBiases {
			b := t.add("ffn_gate_up_exps.bias", FFNGateUpExpsBias, l, 2*eff, n)
			b.Cols, b.Views = hp.ExpertFF, []View{{FFNGateExpsBias, 0, 2*hp.Experts - 1}, {FFNUpExpsBias, 1, 2*hp.Experts - 1}}
		}
	} else {
		t.add("ffn_gate_exps.weight", FFNGateExps, l, embd, eff, n)
		if lay.ExpertBiases {
			t.add("ffn_gate_exps.bias", FFNGateExpsBias, l, eff, n)
		}
		t.add("ffn_up_exps.weight", FFNUpExps, l, embd, eff, n)
		if lay.ExpertBiases {
			t.add("ffn_up_exps.bias", FFNUpExpsBias, l, eff, n)
		}
	}
	t.add("ffn_down_exps.weight", FFNDownExps, l, eff, embd, n)
	if lay.ExpertsOwnNorms {
		t.add("ffn_down_exps.scale", FFNDownExpsScale, l, n).Optional = true
	}
	if lay.ExpertBiases {
		t.add("ffn_down_exps.bias", FFNDownExpsBias, l, embd, n)
	}
	if hp.SharedFF > 0 {
		sff := uint64(hp.SharedFF)
		if lay.SharedExpertGate {
			t.add("ffn_gate_inp_shexp.weight", FFNGateInpShexp, l, embd)
		}
		t.add("ffn_gate_shexp.weight", FFNGateShexp, l, embd, sff)
		t.add("ffn_up_shexp.weight", FFNUpShexp, l, embd, sff)
		t.add("ffn_down_shexp.weight", FFNDownShexp, l, sff, embd)
	}
}

// output adds output_norm and, for an untied model, output.
func (t *table) output() []TensorSpec {
	t.add("output_norm.weight", OutputNorm, -1, t.embd())
	if !t.hp.TiedOutput {
		t.add("output.weight", Output, -1, t.embd(), uint64(t.hp.Vocab))
	}
	return t.specs
}

// weight is the field of m or l that holds a weight of kind k, or nil for
// the kinds kept as floats or bound only as views.
func (m *Model) weight(k TensorKind, layer int) *backend.Weight {
	var l *Layer
	if layer >= 0 {
		l = &m.Layers[layer]
	}
	switch k {
	case TokEmbd:
		return &m.TokEmbd
	case OutputNorm:
		return &m.OutputNorm
	case Output:
		return &m.Output
	case AttnNorm:
		return &l.AttnNorm
	case AttnQ:
		return &l.Wq
	case AttnQBias:
		return &l.Bq
	case AttnK:
		return &l.Wk
	case AttnKBias:
		return &l.Bk
	case AttnV:
		return &l.Wv
	case AttnVBias:
		return &l.Bv
	case AttnQNorm:
		return &l.QNorm
	case AttnKNorm:
		return &l.KNorm
	case AttnOutput:
		return &l.Wo
	case AttnOutputBias:
		return &l.Bo
	case AttnSinks:
		return &l.Sinks
	case AttnPostNorm:
		return &l.AttnPostNorm
	case FFNNorm:
		return &l.FFNNorm
	case FFNGate:
		return &l.Gate
	case FFNUp:
		return &l.Up
	case FFNDown:
		return &l.Down
	case FFNPostNorm:
		return &l.FFNPostNorm
	case PerLayerTokEmbd:
		return &m.PerLayerTokEmbd
	case PerLayerModelProj:
		return &m.PerLayerModelProj
	case PerLayerProjNorm:
		return &m.PerLayerProjNorm
	case PerLayerInpGate:
		return &l.PerLayerInpGate
	case PerLayerProj:
		return &l.PerLayerProj
	case PerLayerPostNorm:
		return &l.PerLayerPostNorm
	case FFNGateInp:
		return &l.GateInp
	case FFNGateInpBias:
		return &l.GateInpBias
	case FFNGateExps:
		return &l.GateExps
	case FFNUpExps:
		return &l.UpExps
	case FFNDownExps:
		return &l.DownExps
	case FFNGateExpsBias:
		return &l.GateExpsBias
	case FFNUpExpsBias:
		return &l.UpExpsBias
	case FFNDownExpsBias:
		return &l.DownExpsBias
	case FFNGateShexp:
		return &l.GateShexp
	case FFNUpShexp:
		return &l.UpShexp
	case FFNDownShexp:
		return &l.DownShexp
	case FFNGateInpShexp:
		return &l.GateInpShexp
	case FFNPostNorm1:
		return &l.FFNPostNorm1
	case FFNPreNorm2:
		return &l.FFNPreNorm2
	case FFNPostNorm2:
		return &l.FFNPostNorm2
	case FFNGateInpScale:
		return &l.GateInpScale
	case FFNDownExpsScale:
		return &l.DownExpsScale
	}
	return nil
}
