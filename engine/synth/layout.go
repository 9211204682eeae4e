package synth

import (
	"fmt"
	"math"

	"nibble/engine/ggml"
)

// dist is the normal distribution a tensor's elements are drawn from.
type dist struct{ mean, std float64 }

// tensorSpec is one tensor to generate.
type tensorSpec struct {
	name string
	typ  ggml.Type
	dims []uint64 // GGUF order: ne[0] = input features
	d    dist
}

// layout lists the tensors llama.cpp's llama / qwen2 loaders expect, with
// the distributions of the shared test fixtures (testdata README §2).
// Projections get std 0.08 at embd 256 and shrink as sqrt(256/embd) so the
// residual stream keeps the same scale in larger models.
func layout(o *Options, vocab int) []tensorSpec {
	var (
		embd   = uint64(o.Embd)
		hd     = uint64(o.Embd / o.Heads)
		qDim   = uint64(o.Heads) * hd
		kvDim  = uint64(o.KVHeads) * hd
		ff     = uint64(o.FF)
		nv     = uint64(vocab)
		norm   = dist{1, 0.1}
		proj   = dist{0, 0.08 * math.Sqrt(256/float64(o.Embd))}
		embedD = dist{0, 0.4}
		bias   = dist{0, 0.1}
	)
	specs := []tensorSpec{{"token_embd.weight", o.Type, []uint64{embd, nv}, embedD}}
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add := func(name string, t ggml.Type, d dist, dims ...uint64) {
			specs = append(specs, tensorSpec{p + name, t, dims, d})
		}
		add("attn_norm.weight", ggml.F32, norm, embd)
		add("attn_q.weight", o.Type, proj, embd, qDim)
		if o.Arch == "qwen2" {
			add("attn_q.bias", ggml.F32, bias, qDim)
		}
		add("attn_k.weight", o.Type, proj, embd, kvDim)
		if o.Arch == "qwen2" {
			add("attn_k.bias", ggml.F32, bias, kvDim)
		}
		add("attn_v.weight", o.Type, proj, embd, kvDim)
		if o.Arch == "qwen2" {
			add("attn_v.bias", ggml.F32, bias, kvDim)
		}
		add("attn_output.weight", o.Type, proj, qDim, embd)
		add("ffn_norm.weight", ggml.F32, norm, embd)
		add("ffn_gate.weight", o.Type, proj, embd, ff)
		add("ffn_up.weight", o.Type, proj, embd, ff)
		add("ffn_down.weight", o.Type, proj, ff, embd)
	}
	specs = append(specs, tensorSpec{"output_norm.weight", ggml.F32, []uint64{embd}, norm})
	if !o.TiedOutput {
		specs = append(specs, tensorSpec{"output.weight", o.Type, []uint64{embd, nv}, embedD})
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
