package model

// Qwen3: the llama block with a per-head RMSNorm of q and k (weights of
// head_dim, attn_q_norm / attn_k_norm) between the projections and RoPE, no
// biases, NeoX RoPE. The head dim comes from attention.key_length: real
// Qwen3 models have head_dim ≠ n_embd/n_head.

// forwardQwen3 is the Qwen3 forward pass; the q/k norms are the layer
// spec's QKNorm inside the attention block.
func forwardQwen3(s *State, p *pass) error {
	s.embed(p)
	for li := range s.m.Layers {
		if err := s.attention(p, li); err != nil {
			return err
		}
		s.residual(p)
		s.feedForward(p, li)
		s.residual(p)
	}
	return s.output(p)
}

// qwen3Layout is llama.cpp's qwen3 table: the llama one with attn_q_norm
// and attn_k_norm after the projections; output.weight optional (tied to
// token_embd when absent).
func qwen3Layout(hp HParams) []TensorSpec {
	t := newTable(hp)
	t.embedding()
	for l := range hp.Layers {
		t.attention(l)
		t.feedForward(l)
	}
	return t.output()
}
