// Package synth writes random-weight GGUF models with real tokenizers, in
// the layout llama.cpp loads (llama and qwen2 architectures). They stand in
// for real models of any size in tests and benchmarks: same shapes, same
// tensor types, same code paths, no downloads.
package synth

import (
	"fmt"
	"math"

	"nibble/engine/ggml"
)

// Options describe the model to generate.
type Options struct {
	Arch                             string // "llama" or "qwen2"
	Layers, Embd, Heads, KVHeads, FF int
	VocabFrom                        string    // GGUF whose tokenizer.* metadata is copied
	VocabData                        []byte    // or the bytes of such a GGUF (takes precedence)
	Type                             ggml.Type // of 2D weights: F16, Q8_0 or Q4_0
	Seed                             uint64
	Ctx                              int     // context length; 0 means 4096
	RopeBase                         float32 // 0 means 500000 (llama) or 1000000 (qwen2)
	// TiedOutput leaves out output.weight so logits use token_embd. A bool
	// cannot say "unset", so Generate takes it as given; DefaultOptions and
	// the CLI pick the per-arch default (tied for llama, untied for qwen2).
	TiedOutput bool
	// AttnScale, when positive, is written as <arch>.attention.scale: the
	// factor on q·k in place of 1/sqrt(head dim) (1.0 as in some Gemma models).
	AttnScale float32
	// KeyOutliers channels of every KV head have their attn_k rows scaled
	// by KeyOutlierGain, the outlier key channels of real models that make
	// per-group int4 K lose precision.
	KeyOutliers    int
	KeyOutlierGain float32
	Progress       func(done, total int64) // bytes of tensor data written; may be nil
}

// DefaultOptions returns the per-architecture defaults; callers fill in the
// sizes, VocabFrom and Seed.
func DefaultOptions(arch string) Options {
	o := Options{Arch: arch, Type: ggml.F16, Ctx: 4096}
	o.RopeBase = defaultRopeBase(arch)
	o.TiedOutput = arch == "llama"
	return o
}

func defaultRopeBase(arch string) float32 {
	if arch == "qwen2" {
		return 1000000
	}
	return 500000
}

// rmsEps follows the tiny fixtures: 1e-5 for llama, 1e-6 for qwen2.
func rmsEps(arch string) float32 {
	if arch == "qwen2" {
		return 1e-6
	}
	return 1e-5
}

// Limits keep a typo from asking for a petabyte file.
const (
	maxLayers = 1024
	maxEmbd   = 65536
	maxFF     = 262144
	maxHeads  = 1024
	maxCtx    = 1 << 24
	maxVocab  = 1 << 22
)

// check validates o and fills the defaults of Ctx and RopeBase.
func (o *Options) check() error {
	if o.Arch != "llama" && o.Arch != "qwen2" {
		return fmt.Errorf("synth: arch %q: want llama or qwen2", o.Arch)
	}
	if o.Ctx == 0 {
		o.Ctx = 4096
	}
	if o.RopeBase == 0 {
		o.RopeBase = defaultRopeBase(o.Arch)
	}
	bounds := []struct {
		name   string
		v, max int
	}{
		{"layers", o.Layers, maxLayers}, {"embd", o.Embd, maxEmbd}, {"heads", o.Heads, maxHeads},
		{"kv-heads", o.KVHeads, maxHeads}, {"ff", o.FF, maxFF}, {"ctx", o.Ctx, maxCtx},
	}
	for _, b := range bounds {
		if b.v < 1 || b.v > b.max {
			return fmt.Errorf("synth: %s = %d: want 1..%d", b.name, b.v, b.max)
		}
	}
	if o.Embd%o.Heads != 0 {
		return fmt.Errorf("synth: embd %d is not divisible by heads %d", o.Embd, o.Heads)
	}
	if o.Heads%o.KVHeads != 0 {
		return fmt.Errorf("synth: heads %d is not divisible by kv-heads %d", o.Heads, o.KVHeads)
	}
	if hd := o.Embd / o.Heads; hd%8 != 0 {
		return fmt.Errorf("synth: head dim %d (embd %d / heads %d) is not a multiple of 8", hd, o.Embd, o.Heads)
	}
	switch o.Type {
	case ggml.F16:
	case ggml.Q8_0, ggml.Q4_0:
		if o.Embd%32 != 0 || o.FF%32 != 0 {
			return fmt.Errorf("synth: %s needs embd and ff multiples of 32 (got embd %d, ff %d)", o.Type, o.Embd, o.FF)
		}
	default:
		// F32 is refused too: it is Type's zero value, so most likely unset.
		return fmt.Errorf("synth: weight type %s: want F16, Q8_0 or Q4_0", o.Type)
	}
	if !(o.RopeBase > 0) {
		return fmt.Errorf("synth: rope base %g must be positive", o.RopeBase)
	}
	if o.AttnScale < 0 || math.IsNaN(float64(o.AttnScale)) || math.IsInf(float64(o.AttnScale), 0) {
		return fmt.Errorf("synth: attention scale %g: want a finite value ≥ 0 (0 is 1/sqrt(head dim))", o.AttnScale)
	}
	if o.KeyOutliers < 0 || o.KeyOutliers > o.Embd/o.Heads {
		return fmt.Errorf("synth: key outliers %d: want 0..%d (the head dim)", o.KeyOutliers, o.Embd/o.Heads)
	}
	if o.KeyOutliers > 0 && !(o.KeyOutlierGain > 0 && o.KeyOutlierGain <= 1000) {
		return fmt.Errorf("synth: key outlier gain %g: want (0, 1000]", o.KeyOutlierGain)
	}
	if o.VocabFrom == "" && o.VocabData == nil {
		return fmt.Errorf("synth: VocabFrom (a GGUF with tokenizer metadata) is required")
	}
	return nil
}

// fileType is llama.cpp's general.file_type (enum llama_ftype).
func fileType(t ggml.Type) uint32 {
	switch t {
	case ggml.F16:
		return 1 // LLAMA_FTYPE_MOSTLY_F16
	case ggml.Q4_0:
		return 2 // LLAMA_FTYPE_MOSTLY_Q4_0
	default:
		return 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	}
}
