package family

// The families the engine ships, as llama.cpp loads them.
var builtin = []Family{
	{
		// Llama 2 and 3 and Mistral (whose files say llama): pre-norm blocks,
		// SwiGLU, adjacent-pair RoPE (the converters permute Q and K).
		// Mixtral is llama with experts (expert_count > 0): a softmax router,
		// the top k renormalised, experts as wide as feed_forward_length.
		Name:    "llama",
		Traits:  Traits{Experts: Experts{Gating: GatingSoftmax, Norm: true}},
		Tensors: Layout{RopeFactors: RopeFreqs},
		Chat:    Chat{Template: "llama2", InstTemplate: "mistral"},
		Synth:   Synth{RopeBase: 500000, RMSEps: 1e-5},
	},
	{
		// Qwen2 and 2.5: the llama block with q/k/v biases and NeoX RoPE.
		Name:    "qwen2",
		Traits:  Traits{RopeNeox: true, QKVBias: true},
		Tensors: Layout{RopeFactors: RopeFreqs},
		Chat:    Chat{Template: "chatml"},
		Synth:   Synth{RopeBase: 1000000, RMSEps: 1e-6, Untied: true},
	},
	{
		// Qwen3: the llama block with per-head q/k RMSNorm before RoPE, no
		// biases, NeoX RoPE; its head dim (attention.key_length) is often
		// not n_embd/n_head.
		Name:   "qwen3",
		Traits: Traits{RopeNeox: true, QKNorm: true},
		Chat:   Chat{Template: "chatml"},
		Synth:  Synth{RopeBase: 1000000, RMSEps: 1e-6},
	},
	{
		// Gemma 2: embeddings ×sqrt(n_embd), norms stored as 1+w by the
		// converters (so applied like llama's), post norms on both block
		// outputs, GELU-tanh feed-forward, attention and output logits
		// soft-capped (50, 30), even layers sliding (4096 when the file does
		// not say), output tied to token_embd; the 27B scales q·k by
		// 1/sqrt(n_embd/n_head).
		Name: "gemma2",
		Traits: Traits{RopeNeox: true, PostNorms: true, GeluFFN: true, EmbdScale: true,
			AttnSoftcap: 50, FinalSoftcap: 30, SWAPattern: 2, Window: 4096},
		Quirks: Quirks{TiedOutput: true, WideScaleLayers: 46},
		Chat:   Chat{Template: "gemma"},
		Synth:  Synth{RopeBase: 10000, RMSEps: 1e-6, Window: 4096},
	},
	{
		// Gemma 3: Gemma 2's block with per-head q/k norms instead of
		// soft-caps; 5 of every 6 layers slide, with RoPE base 10000 there
		// (the file's base is the global layers').
		Name: "gemma3",
		Traits: Traits{RopeNeox: true, QKNorm: true, PostNorms: true, GeluFFN: true, EmbdScale: true,
			SWAPattern: 6, RopeBaseLocal: 10000},
		Quirks: Quirks{TiedOutput: true, WideScaleLayers: 62},
		Chat:   Chat{Template: "gemma"},
		Synth:  Synth{RopeBase: 1000000, RMSEps: 1e-6, Window: 1024},
	},
	{
		// Phi-3 and 3.5: the llama block over fused q|k|v and gate|up
		// weights, NeoX RoPE, LongRoPE where the file has the factors; the
		// file's sliding window is ignored. llama.cpp matches its tokenizer
		// overrides by model name.
		Name:    "phi3",
		Traits:  Traits{RopeNeox: true},
		Quirks:  Quirks{IgnoresWindow: true},
		Tensors: Layout{RopeFactors: RopeLongShort, FusedQKV: true, FusedGateUp: true},
		Chat:    Chat{Template: "phi3"},
		Vocab: Vocab{Names: []string{"phi-3", "phi3"}, RStripSpecials: true,
			RStrip: []string{"</s>"}, KeepRight: []string{"<unk>", "<s>", "<|endoftext|>"}},
		Synth: Synth{RopeBase: 10000, RMSEps: 1e-5, Untied: true},
	},
	{
		// Qwen3-MoE (Qwen3-30B-A3B, 235B-A22B): Qwen3's attention over
		// feed-forward blocks of experts only: softmax router, top k
		// renormalised (llama.cpp and transformers' norm_topk_prob).
		Name:   "qwen3moe",
		Traits: Traits{RopeNeox: true, QKNorm: true, Experts: Experts{Gating: GatingSoftmax, Norm: true, FFPerUsed: true}},
		Chat:   Chat{Template: "chatml"},
		Synth:  Synth{RopeBase: 1000000, RMSEps: 1e-6, Untied: true, Experts: 8, ExpertsUsed: 2, ExpertFF: 64},
	},
	{
		// Gemma 4 (llama.cpp's gemma4, transformers' Gemma4ForCausalLM):
		// Gemma 3's block with norms stored as the weight itself (no 1+w:
		// applied alike), q·k scaled by 1, v RMS-normalised without a
		// weight (and taken from k's projection where attn_v is absent),
		// sliding and global layers named per layer by the file
		// (sliding_window_pattern), each with its own head dim
		// (key_length_swa, key_length), RoPE base (freq_base_swa, freq_base)
		// and rotated dims; the global layers' proportional RoPE is
		// rope_freqs (1 on the rotated pairs, 1e30 on the others). The last
		// shared_kv_layers layers read the cache of the last earlier layer of
		// their kind. E models add per-layer token embeddings; every layer
		// may scale the residual stream (layer_output_scale); output logits
		// soft-capped at 30. The 26B-A4B's blocks run a dense feed-forward
		// beside 128 experts (8 chosen, softmax then renormalised, each
		// weight scaled by its expert's factor), each part with its own
		// norms (Layout.ExpertsOwnNorms).
		Name: "gemma4",
		Traits: Traits{RopeNeox: true, QKNorm: true, PostNorms: true, GeluFFN: true, EmbdScale: true,
			FinalSoftcap: 30, RopeBaseLocal: 10000, AttnScale: 1, VNorm: true, RopeFreqsGlobal: true,
			Experts: Experts{Gating: GatingSoftmax, Norm: true}},
		Tensors: Layout{RopeFactors: RopeFreqs, OptionalV: true, LayerOutScale: true, PerLayerInputs: true,
			FusedGateUpExperts: true, DenseBesideExperts: true, ExpertsOwnNorms: true},
		Chat:  Chat{Template: "gemma4"},
		Synth: Synth{RopeBase: 1000000, RMSEps: 1e-6, Window: 512},
	},
	{
		// gpt-oss (gpt-oss-20b, 120b; llama.cpp's openai-moe): q/k/v and
		// output biases, attention sinks, a sliding window of 128 on the even
		// layers (llama.cpp's swa pattern 2), YaRN, NeoX RoPE, and experts
		// only: a biased router whose top k logits are softmaxed, biased
		// experts with the clamped SwiGLU (alpha 1.702, limit 7; the gpt-oss
		// model card). Its chat format is harmony.
		Name: "gpt-oss",
		Traits: Traits{RopeNeox: true, QKVBias: true, SWAPattern: 2, Window: 128,
			Experts: Experts{Gating: GatingSoftmaxWeight, Act: ExpertSwiGLUClamped, ClampAlpha: 1.702, ClampLimit: 7}},
		Tensors: Layout{ExpertBiases: true, AttnOutputBias: true, AttnSinks: true, FFNNormPostAttention: true},
		Chat:    Chat{Template: "harmony"},
		Synth:   Synth{RopeBase: 150000, RMSEps: 1e-5, Untied: true, Window: 128, Experts: 8, ExpertsUsed: 2, ExpertFF: 64},
	},
}

func init() {
	for _, f := range builtin {
		Register(f)
	}
}
