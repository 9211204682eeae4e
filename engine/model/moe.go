package model

import "nibble/engine/backend"

// The mixture-of-experts feed-forward (docs/ARCHITECTURE.md, "Mixture of
// experts"), as llama.cpp's build_moe_ffn computes it: a router chooses
// each token's k experts and their weights (backend.Experts.Route), the
// chosen experts' gated feed-forwards run on the token (MatMulID reads only
// their rows) and their outputs are summed by weight. What a family adds
// (biases, fused gate|up experts, shared experts, a dense feed-forward
// beside the experts) comes from its layout (engine/family.Layout) and the
// weights the layer has.

// moeScratch are the tensors of the experts' block, for maxBatch tokens of
// k slots each (slot s = token·k + j).
type moeScratch struct {
	router   backend.Tensor // tokens × experts logits
	ids      backend.Tensor // slots: chosen expert ids (floats)
	weights  backend.Tensor // slots: their weights
	ids2     backend.Tensor // slots: ids doubled (fused gate|up half-experts)
	gate, up backend.Tensor // slots × expert ff
	y        backend.Tensor // slots × embd: each chosen expert's output
	in       backend.Tensor // tokens × embd: the block's normed input
}

func (m *moeScratch) tensors() []backend.Tensor {
	return []backend.Tensor{m.router, m.ids, m.weights, m.ids2, m.gate, m.up, m.y, m.in}
}

// moeFeedForward is block li's mixture-of-experts feed-forward on x,
// leaving its output in h: the experts' weighted sum, plus the shared
// experts (gated where the family gates them) or the dense feed-forward
// where the layer has them.
func (s *State) moeFeedForward(p *pass, li int) {
	if s.lay.ExpertsOwnNorms {
		s.gemma4Experts(p, li)
		return
	}
	b, hp, l, ms := s.b, &s.m.HP, &s.m.Layers[li], &s.moe
	n := p.n
	b.RMSNorm(ms.in, s.x, l.FFNNorm, hp.RMSEps, n)
	s.route(p, li, ms.in)
	s.experts(p, li, ms.in, s.h)
	switch {
	case l.GateShexp != nil:
		s.beside(n, ms.in, l.GateShexp, l.UpShexp, l.DownShexp, hp.SharedFF, s.specs[li].Act, l.GateInpShexp)
	case l.Gate != nil:
		s.beside(n, ms.in, l.Gate, l.Up, l.Down, hp.FF, s.specs[li].Act, nil)
	}
}

// route chooses block li's experts for the rows in (the router's input:
// the normed rows, or what a family computes instead), leaving the ids and
// weights in the scratch.
func (s *State) route(p *pass, li int, in backend.Tensor) {
	l, ms := &s.m.Layers[li], &s.moe
	s.b.MatMul(ms.router, l.GateInp, in, p.n)
	if l.GateInpBias != nil {
		s.b.AddBias(ms.router, l.GateInpBias, p.n)
	}
	s.ex.Route(ms.ids, ms.weights, ms.router, p.n, &s.specs[li].Router)
	if l.DownExpsScale != nil {
		// Gemma 4's per-expert factor on the chosen weights.
		hp := &s.m.HP
		s.b.(backend.ExpertScaler).ScaleByExpert(ms.weights, l.DownExpsScale, hp.Experts, ms.ids, p.n*hp.ExpertsUsed)
	}
}

// experts is the routed part of block li on the normed rows in, with the
// experts route chose, leaving Σ_j weight_j·expert_j(in) in out.
func (s *State) experts(p *pass, li int, in, out backend.Tensor) {
	b, ex, hp, l, ls, ms := s.b, s.ex, &s.m.HP, &s.m.Layers[li], &s.specs[li], &s.moe
	n, k, ff := p.n, hp.ExpertsUsed, hp.ExpertFF
	slots := n * k
	// Gate and up of separate tensors are indexed by expert; the views of a
	// fused gate|up tensor by half-expert, twice the id (TensorLayout).
	gateUpIDs, gateUpExperts := ms.ids, hp.Experts
	if s.lay.FusedGateUpExperts {
		b.Copy(ms.ids2, 0, ms.ids, 0, slots)
		b.Scale(ms.ids2, 2, slots)
		gateUpIDs, gateUpExperts = ms.ids2, 2*hp.Experts-1
	}
	ex.MatMulID(ms.gate, l.GateExps, gateUpExperts, in, gateUpIDs, n, k, false)
	ex.MatMulID(ms.up, l.UpExps, gateUpExperts, in, gateUpIDs, n, k, false)
	if l.GateExpsBias != nil {
		ex.AddBiasID(ms.gate, l.GateExpsBias, gateUpExperts, gateUpIDs, slots)
		ex.AddBiasID(ms.up, l.UpExpsBias, gateUpExperts, gateUpIDs, slots)
	}
	switch ls.ExpertAct {
	case SwiGLUClamped:
		ex.SwiGLUClamped(ms.gate, ms.gate, ms.up, slots*ff, ls.ClampAlpha, ls.ClampLimit)
	case GeluTanhGLU:
		b.GeluGLU(ms.gate, ms.gate, ms.up, slots*ff)
	default:
		b.SwiGLU(ms.gate, ms.gate, ms.up, slots*ff)
	}
	ex.MatMulID(ms.y, l.DownExps, hp.Experts, ms.gate, ms.ids, n, k, true)
	if l.DownExpsBias != nil {
		ex.AddBiasID(ms.y, l.DownExpsBias, hp.Experts, ms.ids, slots)
	}
	ex.SumExperts(out, ms.y, ms.weights, n, k, hp.Embd)
}

// beside adds to h a dense gated feed-forward of width ff on the normed
// rows in (shared experts, or a dense feed-forward beside the experts),
// its output scaled per token by sigmoid(gateInp·in) where gateInp is set
// (Qwen2-MoE's shared expert gate). The experts' scratch is reused: their
// outputs are summed into h already.
func (s *State) beside(n int, in backend.Tensor, gate, up, down backend.Weight, ff int, act Activation, gateInp backend.Weight) {
	b, hp, ms := s.b, &s.m.HP, &s.moe
	s.gatedFFN(n, in, ms.y, gate, up, down, ff, act)
	if gateInp != nil {
		// A router of one expert with sigmoid gating: its weight is the
		// gate, and the sum of one expert scales the output by it.
		b.MatMul(ms.router, gateInp, in, n)
		s.ex.Route(ms.ids, ms.weights, ms.router, n, &backend.Router{Experts: 1, Used: 1, Gating: backend.GatingSigmoid})
		s.ex.SumExperts(ms.in, ms.y, ms.weights, n, 1, hp.Embd)
		b.Add(s.h, ms.in, n*hp.Embd)
		return
	}
	b.Add(s.h, ms.y, n*hp.Embd)
}

// gatedFFN is down(act(gate·in)·(up·in)) of width ff for n rows, into out.
func (s *State) gatedFFN(n int, in, out backend.Tensor, gate, up, down backend.Weight, ff int, act Activation) {
	b := s.b
	b.MatMul(s.gate, gate, in, n)
	b.MatMul(s.up, up, in, n)
	if act == GeluTanhGLU {
		b.GeluGLU(s.gate, s.gate, s.up, n*ff)
	} else {
		b.SwiGLU(s.gate, s.gate, s.up, n*ff)
	}
	b.MatMul(out, down, s.gate, n)
}
