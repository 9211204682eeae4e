package model

import (
	"math"

	"nibble/engine/backend"
)

// Gemma 4's blocks beyond the shared ones (docs/ARCHITECTURE.md, "Model
// families"): per-layer inputs (the E models) and the experts with their
// own norms (26B-A4B). Sharing K/V is in attention (blocks.go).

// perLayerInputs makes Gemma 4's per-layer inputs of the batch from the
// scaled embeddings in x: (RMSNorm(W·x/sqrt(n_embd)) + E_tok·sqrt(width))/sqrt(2)
// for every layer's slice, as llama.cpp and transformers compute them.
func (s *State) perLayerInputs(p *pass) {
	m, b, hp := s.m, s.b, &s.m.HP
	n, all := p.n, p.n*hp.Layers*hp.PerLayerEmbd
	b.MatMul(s.pl, m.PerLayerModelProj, s.x, n)
	b.Scale(s.pl, float32(1/math.Sqrt(float64(hp.Embd))), all)
	b.RMSNorm(s.pl, s.pl, m.PerLayerProjNorm, hp.RMSEps, n*hp.Layers)
	b.Embed(s.plTok, m.PerLayerTokEmbd, p.tokens)
	b.Scale(s.plTok, float32(math.Sqrt(float64(hp.PerLayerEmbd))), all)
	b.Add(s.pl, s.plTok, all)
	b.Scale(s.pl, float32(1/math.Sqrt2), all)
}

// perLayerInput is block li's use of its per-layer input, leaving
// RMSNorm(proj(gelu_tanh(gate·x) ∘ input)) in h.
func (s *State) perLayerInput(p *pass, li int) {
	b, hp, l := s.b, &s.m.HP, &s.m.Layers[li]
	n, w := p.n, hp.PerLayerEmbd
	b.MatMul(s.plg, l.PerLayerInpGate, s.x, n)
	b.(backend.Gemma4Ops).CopyRows(s.pli, 0, w, s.pl, li*w, hp.Layers*w, n, w)
	b.GeluGLU(s.plg, s.plg, s.pli, n*w)
	b.MatMul(s.h, l.PerLayerProj, s.plg, n)
	b.RMSNorm(s.h, s.h, l.PerLayerPostNorm, hp.RMSEps, n)
}

// gemma4Experts is block li's feed-forward in Gemma 4's mixture of
// experts, leaving in h (llama.cpp's gemma4 graph, transformers'
// Gemma4TextDecoderLayer):
//
//	post_ffw_norm_1(dense(ffn_norm(x))) + post_ffw_norm_2(experts(pre_ffw_norm_2(x)))
//
// with the router on RMSNorm(x)·ffn_gate_inp.scale/sqrt(n_embd). The
// block's post_ffw_norm follows in the forward pass.
func (s *State) gemma4Experts(p *pass, li int) {
	b, hp, l, ms := s.b, &s.m.HP, &s.m.Layers[li], &s.moe
	n, E := p.n, hp.Embd
	b.RMSNorm(ms.in, s.x, l.FFNNorm, hp.RMSEps, n)
	s.gatedFFN(n, ms.in, s.h, l.Gate, l.Up, l.Down, s.specs[li].FF, s.specs[li].Act)
	b.RMSNorm(s.h, s.h, l.FFNPostNorm1, hp.RMSEps, n)
	b.RMSNorm(s.rin, s.x, l.GateInpScale, hp.RMSEps, n)
	b.Scale(s.rin, float32(1/math.Sqrt(float64(E))), n*E)
	b.RMSNorm(ms.in, s.x, l.FFNPreNorm2, hp.RMSEps, n)
	s.route(p, li, s.rin)
	s.experts(p, li, ms.in, s.rin) // the router has read s.rin: the sum may overwrite it
	b.RMSNorm(s.rin, s.rin, l.FFNPostNorm2, hp.RMSEps, n)
	b.Add(s.h, s.rin, n*E)
}
