package model

// Llama, Mistral (files of arch "llama") and Qwen2: pre-norm blocks,
// SwiGLU, adjacent-pair RoPE for llama (its converters permute Q/K), NeoX
// RoPE and q/k/v biases for qwen2.

// forwardLlama is the forward pass of llama, mistral and qwen2.
func forwardLlama(s *State, p *pass) error {
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

// llamaLayout is the tensor table of llama.cpp's llama and qwen2 loaders:
// rope_freqs optional (where converters put it), token_embd, each block in
// forward-pass order with each bias after its weight (qwen2), output_norm,
// and output only for untied models.
func llamaLayout(hp HParams) []TensorSpec {
	t := newTable(hp)
	t.ropeFactors("rope_freqs.weight", RopeFreqs)
	t.embedding()
	for l := range hp.Layers {
		t.attention(l)
		t.feedForward(l)
	}
	return t.output()
}
