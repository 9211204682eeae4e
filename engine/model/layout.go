package model

import (
	"fmt"

	"nibble/engine/backend"
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
)

// IsNorm reports whether k is an RMSNorm weight.
func (k TensorKind) IsNorm() bool { return k == AttnNorm || k == FFNNorm || k == OutputNorm }

// IsBias reports whether k is a projection bias.
func (k TensorKind) IsBias() bool { return k == AttnQBias || k == AttnKBias || k == AttnVBias }

// TensorSpec is one tensor of a llama-family GGUF: the loader requires it
// with exactly these dims, and the writers of test and synthetic models
// declare it so.
type TensorSpec struct {
	Name     string
	Kind     TensorKind
	Layer    int      // block index, -1 outside the blocks
	Dims     []uint64 // GGUF order: ne[0] (the input features) first
	Optional bool     // bound only when present; writers leave it out
}

// TensorLayout lists the tensors a model of hp has, as llama.cpp's llama
// and qwen2 loaders require them: output.weight only for untied models,
// q/k/v biases only for families that have them, rope_freqs optional. The
// order is the one synth and the test writers put in files: rope_freqs
// (where converters put it), token_embd, each block in forward-pass order
// with each bias after its weight, output_norm, output. Other writers order
// tensors differently; the loader finds them by name.
func TensorLayout(hp HParams) []TensorSpec {
	var (
		embd  = uint64(hp.Embd)
		qDim  = uint64(hp.QDim())
		kvDim = uint64(hp.KVDim())
		ff    = uint64(hp.FF)
		vocab = uint64(hp.Vocab)
	)
	specs := make([]TensorSpec, 0, 3+hp.Layers*12)
	add := func(name string, k TensorKind, layer int, dims ...uint64) {
		specs = append(specs, TensorSpec{Name: name, Kind: k, Layer: layer, Dims: dims})
	}
	add("rope_freqs.weight", RopeFreqs, -1, uint64(hp.RopeDims/2))
	specs[0].Optional = true
	add("token_embd.weight", TokEmbd, -1, embd, vocab)
	for l := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", AttnNorm, l, embd)
		add(p+"attn_q.weight", AttnQ, l, embd, qDim)
		if hp.QKVBias {
			add(p+"attn_q.bias", AttnQBias, l, qDim)
		}
		add(p+"attn_k.weight", AttnK, l, embd, kvDim)
		if hp.QKVBias {
			add(p+"attn_k.bias", AttnKBias, l, kvDim)
		}
		add(p+"attn_v.weight", AttnV, l, embd, kvDim)
		if hp.QKVBias {
			add(p+"attn_v.bias", AttnVBias, l, kvDim)
		}
		add(p+"attn_output.weight", AttnOutput, l, qDim, embd)
		add(p+"ffn_norm.weight", FFNNorm, l, embd)
		add(p+"ffn_gate.weight", FFNGate, l, embd, ff)
		add(p+"ffn_up.weight", FFNUp, l, embd, ff)
		add(p+"ffn_down.weight", FFNDown, l, ff, embd)
	}
	add("output_norm.weight", OutputNorm, -1, embd)
	if !hp.TiedOutput {
		add("output.weight", Output, -1, embd, vocab)
	}
	return specs
}

// FamilyHParams is hp for arch with the family's flags set (RoPE flavour,
// QKV biases), for writers that build a model from sizes rather than read
// one; the caller fills in the sizes.
func FamilyHParams(arch string) HParams {
	fam := families[arch]
	return HParams{Arch: arch, RopeNeox: fam.neox, QKVBias: fam.bias, RopeScale: 1}
}

// weight is the field of m that holds s, or nil for rope_freqs (kept as
// floats, not as a Weight).
func (m *Model) weight(s *TensorSpec) *backend.Weight {
	var l *Layer
	if s.Layer >= 0 {
		l = &m.Layers[s.Layer]
	}
	switch s.Kind {
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
	case AttnOutput:
		return &l.Wo
	case FFNNorm:
		return &l.FFNNorm
	case FFNGate:
		return &l.Gate
	case FFNUp:
		return &l.Up
	case FFNDown:
		return &l.Down
	}
	return nil
}
