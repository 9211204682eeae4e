// Package model holds the model families' forward passes, written once
// against backend ops, and their hyper-parameters read from GGUF metadata.
package model

import (
	"fmt"
	"math"

	"nibble/engine/gguf"
)

// HParams are the architecture numbers a forward pass and the memory
// estimator need. They come from GGUF metadata or from the model catalog.
type HParams struct {
	Arch       string // llama, qwen2 (mistral files use "llama")
	Layers     int
	Embd       int
	Heads      int
	KVHeads    int
	HeadDim    int
	FF         int
	Vocab      int
	CtxTrain   int
	RopeBase   float32
	RopeDims   int
	RopeNeox   bool
	RopeScale  float32 // linear position scale factor (1 = none)
	RMSEps     float32
	Window     int  // sliding-window attention in tokens, 0 = none
	TiedOutput bool // logits use token_embd when there is no output.weight
	QKVBias    bool
	// AttnScale multiplies q·k (llama.cpp's <arch>.attention.scale); 0 means
	// the usual 1/sqrt(HeadDim).
	AttnScale float32
}

// QKScale is the factor attention applies to q·k.
func (hp HParams) QKScale() float32 {
	if hp.AttnScale > 0 {
		return hp.AttnScale
	}
	return float32(1 / math.Sqrt(float64(hp.HeadDim)))
}

// Families this engine runs, with their RoPE flavour.
var families = map[string]struct{ neox, bias bool }{
	"llama": {false, false},
	"qwen2": {true, true},
}

// Supported reports whether arch has a forward pass here.
func Supported(arch string) bool { _, ok := families[arch]; return ok }

// HParamsFromGGUF reads the hyper-parameters of a family this engine runs.
func HParamsFromGGUF(f *gguf.File) (HParams, error) {
	if arch := f.Arch(); !Supported(arch) {
		return HParams{}, fmt.Errorf("architecture %q is not supported (want llama, mistral or qwen2)", arch)
	}
	return ReadHParams(f)
}

// ReadHParams reads the standard metadata keys of any architecture (the
// estimator sizes models this engine cannot run yet from it); family flags
// are set for the families it runs.
func ReadHParams(f *gguf.File) (HParams, error) {
	arch := f.Arch()
	if arch == "" {
		return HParams{}, fmt.Errorf("general.architecture is missing")
	}
	fam := families[arch]
	hp := HParams{Arch: arch, RopeNeox: fam.neox, QKVBias: fam.bias, RopeScale: 1}
	need := func(key string, dst *int) error {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			return fmt.Errorf("metadata %s.%s is missing", arch, key)
		}
		if v == 0 || v > 1<<24 {
			return fmt.Errorf("metadata %s.%s = %d is out of range", arch, key, v)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		key string
		dst *int
	}{
		{"block_count", &hp.Layers}, {"embedding_length", &hp.Embd},
		{"attention.head_count", &hp.Heads}, {"feed_forward_length", &hp.FF},
		{"context_length", &hp.CtxTrain},
	} {
		if err := need(k.key, k.dst); err != nil {
			return HParams{}, err
		}
	}
	hp.KVHeads = hp.Heads
	if v, ok := f.Uint(arch + ".attention.head_count_kv"); ok {
		hp.KVHeads = int(v)
	}
	hp.HeadDim = hp.Embd / hp.Heads
	if v, ok := f.Uint(arch + ".attention.key_length"); ok {
		hp.HeadDim = int(v)
	}
	hp.RopeDims = hp.HeadDim
	if v, ok := f.Uint(arch + ".rope.dimension_count"); ok {
		hp.RopeDims = int(v)
	}
	hp.RopeBase = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		hp.RopeBase = float32(v)
	}
	if t, _ := f.String(arch + ".rope.scaling.type"); t == "linear" {
		if v, ok := f.Float(arch + ".rope.scaling.factor"); ok && v > 0 {
			hp.RopeScale = float32(1 / v)
		}
	}
	hp.RMSEps = 1e-5
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		hp.RMSEps = float32(v)
	}
	if v, ok := f.Float(arch + ".attention.scale"); ok {
		hp.AttnScale = float32(v)
	}
	if v, ok := f.Uint(arch + ".attention.sliding_window"); ok {
		hp.Window = int(v)
	}
	if n, ok := f.ArrayLen("tokenizer.ggml.tokens"); ok {
		hp.Vocab = n
	} else if v, ok := f.Uint(arch + ".vocab_size"); ok {
		hp.Vocab = int(v)
	}
	_, hasOutput := f.Tensor("output.weight")
	hp.TiedOutput = !hasOutput
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 && hp.Vocab == 0 {
		hp.Vocab = int(t.Dims[1])
	}
	return hp, hp.Validate()
}

// Validate rejects shapes the forward pass cannot run.
func (hp HParams) Validate() error {
	switch {
	case hp.Layers <= 0 || hp.Embd <= 0 || hp.Heads <= 0 || hp.KVHeads <= 0 || hp.FF <= 0 || hp.Vocab <= 0:
		return fmt.Errorf("model %s: layers %d, embd %d, heads %d, kv heads %d, ff %d, vocab %d must all be positive",
			hp.Arch, hp.Layers, hp.Embd, hp.Heads, hp.KVHeads, hp.FF, hp.Vocab)
	case hp.Heads%hp.KVHeads != 0:
		return fmt.Errorf("model %s: %d heads is not a multiple of %d kv heads", hp.Arch, hp.Heads, hp.KVHeads)
	case hp.HeadDim <= 0 || hp.HeadDim%8 != 0 || hp.HeadDim > 512:
		return fmt.Errorf("model %s: head dim %d not supported (multiple of 8, at most 512)", hp.Arch, hp.HeadDim)
	case hp.RopeDims <= 0 || hp.RopeDims > hp.HeadDim || hp.RopeDims%2 != 0:
		return fmt.Errorf("model %s: rope dims %d invalid for head dim %d", hp.Arch, hp.RopeDims, hp.HeadDim)
	case hp.RopeBase <= 0 || math.IsNaN(float64(hp.RopeBase)):
		return fmt.Errorf("model %s: rope base %g invalid", hp.Arch, hp.RopeBase)
	case hp.AttnScale < 0 || math.IsNaN(float64(hp.AttnScale)) || math.IsInf(float64(hp.AttnScale), 0):
		return fmt.Errorf("model %s: attention scale %g invalid", hp.Arch, hp.AttnScale)
	}
	return nil
}

// QDim is the width of the query projection (all heads).
func (hp HParams) QDim() int { return hp.Heads * hp.HeadDim }

// KVDim is the width of the key or value projection (all kv heads).
func (hp HParams) KVDim() int { return hp.KVHeads * hp.HeadDim }
