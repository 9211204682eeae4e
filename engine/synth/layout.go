package synth

import (
	"math"

	"nibble/engine/ggml"
	"nibble/engine/model"
)

// dist is the normal distribution a tensor's elements are drawn from.
type dist struct{ mean, std float64 }

// tensorSpec is one tensor to generate.
type tensorSpec struct {
	name string
	typ  ggml.Type
	dims []uint64 // GGUF order: ne[0] = input features
	d    dist
	// Rows r with r%gainPeriod in gainRows are scaled by gain (outlier
	// output channels, one set per KV head).
	gainRows   map[int]bool
	gainPeriod int
	gain       float32
	values     []float32 // fixed contents (one row) instead of draws from d
}

func (s *tensorSpec) rowGain(r int) float32 {
	if s.gainRows != nil && s.gainRows[r%s.gainPeriod] {
		return s.gain
	}
	return 1
}

// outlierChannels spreads n channels evenly over a head of hd dims.
func outlierChannels(n, hd int) map[int]bool {
	set := map[int]bool{}
	for j := 0; j < n; j++ {
		c := (j*hd/n + 2) % hd
		for set[c] {
			c = (c + 1) % hd
		}
		set[c] = true
	}
	return set
}

// layout lists the tensors of model.TensorLayout, with the distributions the
// tiny reference test models were generated with (norms 1 + 0.1·N(0,1),
// projections 0.08·N(0,1), embeddings 0.4·N(0,1), biases 0.1·N(0,1)): F32
// norms and biases, the rest of type o.Type. Projections get std 0.08 at
// embd 256 and shrink as sqrt(256/embd) so the residual stream keeps the same
// scale in larger models.
func layout(o *Options, vocab int) []tensorSpec {
	hd := o.headDim()
	hp := o.hparams(vocab)
	var (
		norm   = dist{1, 0.1}
		proj   = dist{0, 0.08 * math.Sqrt(256/float64(o.Embd))}
		embedD = dist{0, 0.4}
		bias   = dist{0, 0.1}
		sinks  = dist{0, 1} // logits about as large as the scores they join
	)
	var specs []tensorSpec
	for _, s := range model.TensorLayout(hp) {
		longRoPE := o.LongRoPEOrigCtx > 0 && (s.Kind == model.RopeFactorsLong || s.Kind == model.RopeFactorsShort)
		if s.Optional && !longRoPE && !o.gemma4Writes(hp, s) {
			continue
		}
		typ, d := o.Type, proj
		switch {
		case s.Kind == model.RopeFactorsShort:
			typ, d = ggml.F32, dist{1, 0.05}
		case s.Kind == model.RopeFactorsLong:
			typ, d = ggml.F32, dist{4, 0.5}
		case s.Kind.IsNorm():
			typ, d = ggml.F32, norm
		case s.Kind.IsBias():
			typ, d = ggml.F32, bias
		case s.Kind.IsRouter():
			typ = ggml.F32
		case s.Kind == model.AttnSinks:
			typ, d = ggml.F32, sinks
		case s.Kind.IsExperts() && o.ExpertType != 0:
			typ = o.ExpertType
		case s.Kind == model.TokEmbd || s.Kind == model.Output:
			d = embedD
		}
		switch {
		case s.Kind == model.LayerOutScale || s.Kind == model.FFNDownExpsScale:
			typ, d = ggml.F32, dist{1, 0.1}
		case s.Kind == model.PerLayerTokEmbd:
			d = embedD
		}
		spec := tensorSpec{name: s.Name, typ: typ, dims: s.Dims, d: d}
		if o.gemma4() && s.Kind == model.RopeFreqs {
			spec.typ, spec.values = ggml.F32, o.ropeFreqs()
		}
		if s.Kind == model.AttnK && o.KeyOutliers > 0 {
			spec.gainRows, spec.gainPeriod, spec.gain = outlierChannels(o.KeyOutliers, hd), hd, o.KeyOutlierGain
		}
		specs = append(specs, spec)
	}
	return specs
}

// bytes is the tensor's size in the file.
func (s *tensorSpec) bytes() int64 {
	n := int64(1)
	for _, d := range s.dims[1:] {
		n *= int64(d)
	}
	return n * int64(s.typ.RowBytes(int(s.dims[0])))
}

// hparams are the hyper-parameters of the model o describes, as the
// loader will read them back.
func (o *Options) hparams(vocab int) model.HParams {
	hd := o.headDim()
	hp := model.FamilyHParams(o.Arch)
	hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.HeadDim, hp.RopeDims = o.Layers, o.Embd, o.Heads, o.KVHeads, hd, hd
	hp.FF, hp.Vocab, hp.TiedOutput = o.FF, vocab, o.TiedOutput
	hp.Experts, hp.ExpertsUsed, hp.ExpertFF, hp.SharedFF = o.Experts, o.ExpertsUsed, o.ExpertFF, o.SharedFF
	if o.gemma4() {
		g := o.Gemma4
		hp.Window = o.Window
		hp.HeadDim, hp.RopeDims = o.headDimGlobal(), o.headDimGlobal()
		hp.HeadDimLocal, hp.RopeDimsLocal = hd, hd
		hp.SlidingLayers = o.slidingLayers()
		hp.SharedKVLayers, hp.PerLayerEmbd = g.SharedKVLayers, g.PerLayerEmbd
		if kvh := o.layerKVHeads(); kvh != nil {
			hp.LayerKVHeads, hp.KVHeads = kvh, kvh[0]
		}
	}
	return hp
}

// layerKVHeads is a gemma4 model's head_count_kv per layer, nil when every
// layer has KVHeads.
func (o *Options) layerKVHeads() []int {
	g := o.Gemma4
	if !o.gemma4() || g.KVHeadsGlobal == 0 || g.KVHeadsGlobal == o.KVHeads {
		return nil
	}
	kvh := make([]int, o.Layers)
	for il, sliding := range o.slidingLayers() {
		kvh[il] = o.KVHeads
		if !sliding {
			kvh[il] = g.KVHeadsGlobal
		}
	}
	return kvh
}

// gemma4Writes reports whether a synthetic Gemma 4 has the optional tensor
// s: rope_freqs, every layer's output scale, the experts' factors, and
// attn_v on the layers that store K/V, except the global ones when v comes
// from k.
func (o *Options) gemma4Writes(hp model.HParams, s model.TensorSpec) bool {
	if !o.gemma4() {
		return false
	}
	switch s.Kind {
	case model.RopeFreqs, model.LayerOutScale, model.FFNDownExpsScale:
		return true
	case model.AttnV:
		return hp.KVSource(s.Layer) == s.Layer && !(o.Gemma4.GlobalVFromK && !hp.SlidingLayer(s.Layer))
	}
	return false
}
