package model

// Phi-3: the llama block over fused weights. attn_qkv's rows are
// [Q (n_head·hd) | K (n_kv·hd) | V (n_kv·hd)] and ffn_up's are
// [gate (n_ff) | up (n_ff)], output silu(gate)·up; the loader binds each
// part as a view of the file's tensor (TensorSpec.Views), so the blocks
// see Wq, Wk, Wv, Gate and Up as for llama and nothing is copied. NeoX
// RoPE; LongRoPE where the file has rope_factors_long/short (per-pair
// divisors, long ones for caches beyond rope.scaling.original_context_length,
// and rope.scaling.attn_factor on cos and sin); separate output.weight.
// Phi-3's sliding window is ignored, as llama.cpp does.

// forwardPhi3 is the Phi-3 forward pass.
func forwardPhi3(s *State, p *pass) error {
	s.embed(p)
	for li := range s.m.Layers {
		if err := s.attention(p, li); err != nil { // q, k, v: views of attn_qkv
			return err
		}
		s.residual(p)
		s.feedForward(p, li) // gate, up: views of ffn_up
		s.residual(p)
	}
	return s.output(p)
}

// phi3Layout is llama.cpp's phi3 table: rope factors (optional),
// token_embd, per block attn_norm, attn_qkv, attn_output, ffn_norm,
// ffn_up (gate|up), ffn_down, then output_norm and output.
func phi3Layout(hp HParams) []TensorSpec {
	t := newTable(hp)
	q, kv, ff := hp.QDim(), hp.KVDim(), hp.FF
	t.ropeFactors("rope_factors_long.weight", RopeFactorsLong)
	t.ropeFactors("rope_factors_short.weight", RopeFactorsShort)
	t.embedding()
	for l := range hp.Layers {
		t.add("attn_norm.weight", AttnNorm, l, t.embd())
		t.add("attn_qkv.weight", AttnQKV, l, t.embd(), uint64(q+2*kv)).Views = []View{
			{AttnQ, 0, q}, {AttnK, q, kv}, {AttnV, q + kv, kv}}
		t.add("attn_output.weight", AttnOutput, l, t.qDim(), t.embd())
		t.add("ffn_norm.weight", FFNNorm, l, t.embd())
		t.add("ffn_up.weight", FFNGateUp, l, t.embd(), uint64(2*ff)).Views = []View{{FFNGate, 0, ff}, {FFNUp, ff, ff}}
		t.add("ffn_down.weight", FFNDown, l, t.ff(), t.embd())
	}
	return t.output()
}
