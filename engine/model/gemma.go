package model

// Gemma 2 and Gemma 3 (llama.cpp's conventions, which the converters
// follow):
//   - embeddings scaled by sqrt(n_embd); output tied to token_embd;
//   - every norm stored as 1+w, so applied like llama's;
//   - each block's attention and feed-forward outputs normalised
//     (post_attention_norm, post_ffw_norm) before the residual add;
//   - GELU-tanh gated feed-forward;
//   - q·k scaled by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for 27B);
//   - sliding-window layers: Gemma 2 the even ones, Gemma 3 il%6 < 5, where
//     RoPE uses base 10000 (the file's base is the global layers');
//   - Gemma 2 soft-caps attention logits (50) and final logits (30);
//     Gemma 3 instead has per-head q/k norms.
// All of it is in the layer specs (HParams.Layer) but the block order.

// forwardGemma is the Gemma 2 and 3 forward pass.
func forwardGemma(s *State, p *pass) error {
	s.embed(p) // ×sqrt(n_embd)
	for li := range s.m.Layers {
		l := &s.m.Layers[li]
		if err := s.attention(p, li); err != nil {
			return err
		}
		s.postNorm(p, l.AttnPostNorm)
		s.residual(p)
		s.feedForward(p, li) // GELU-tanh GLU
		s.postNorm(p, l.FFNPostNorm)
		s.residual(p)
	}
	return s.output(p) // final soft-cap for Gemma 2
}

// gemmaLayout is llama.cpp's gemma2/gemma3 table: token_embd (also the
// output), per block attn_norm, q/k/v (q/k norms for Gemma 3),
// attn_output, post_attention_norm, ffn_norm, gate/up/down, post_ffw_norm,
// then output_norm (HParams.TiedOutput is always set: llama.cpp ignores an
// output.weight).
func gemmaLayout(hp HParams) []TensorSpec {
	t := newTable(hp)
	t.embedding()
	for l := range hp.Layers {
		t.attention(l)
		t.add("post_attention_norm.weight", AttnPostNorm, l, t.embd())
		t.feedForward(l)
		t.add("post_ffw_norm.weight", FFNPostNorm, l, t.embd())
	}
	return t.output()
}
