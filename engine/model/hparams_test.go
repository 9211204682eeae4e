package model

import (
	"strings"
	"testing"

	"nibble/engine/gguf"
)

// attention.scale replaces 1/sqrt(head dim) on q·k; an unusable one is refused.
func TestQKScale(t *testing.T) {
	hp := HParams{Arch: "llama", Layers: 1, Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 512, Vocab: 10, RopeBase: 10000, RopeDims: 64}
	if got := hp.QKScale(); got != 0.125 {
		t.Errorf("default scale %g, want 1/sqrt(64) = 0.125", got)
	}
	hp.AttnScale = 1
	if got := hp.QKScale(); got != 1 {
		t.Errorf("scale %g, want the file's 1", got)
	}
	if err := hp.Validate(); err != nil {
		t.Errorf("scale 1 refused: %v", err)
	}
	hp.AttnScale = -0.5
	if err := hp.Validate(); err == nil || !strings.Contains(err.Error(), "attention scale") {
		t.Errorf("scale -0.5: err %v, want an attention scale error", err)
	}
}

// YaRN's keys as llama.cpp reads them: the factor as 1/scale, the betas,
// ext and attention factors with their defaults when absent, and the
// original context (the training one when absent).
func TestReadYaRN(t *testing.T) {
	for _, c := range []struct {
		name  string
		keys  map[string]any
		check func(hp HParams) bool
	}{
		{"defaults", map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(32)},
			func(hp HParams) bool {
				return hp.RopeScale == 1.0/32 && hp.RopeExtFactor == 1 && hp.RopeBetaFast == 32 && hp.RopeBetaSlow == 1 &&
					hp.RopeCtxOrig == 256 && hp.RopeAttnFactor == 0
			}},
		{"keys", map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4),
			"llama.rope.scaling.original_context_length": uint32(4096), "llama.rope.scaling.yarn_beta_fast": float32(16),
			"llama.rope.scaling.yarn_beta_slow": float32(2), "llama.rope.scaling.yarn_ext_factor": float32(0.5),
			"llama.rope.scaling.yarn_attn_factor": float32(0.9)},
			func(hp HParams) bool {
				return hp.RopeScale == 0.25 && hp.RopeExtFactor == 0.5 && hp.RopeBetaFast == 16 && hp.RopeBetaSlow == 2 &&
					hp.RopeCtxOrig == 4096 && hp.RopeAttnFactor == 0.9
			}},
		{"linear is no YaRN", map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(2)},
			func(hp HParams) bool { return hp.RopeScale == 0.5 && hp.RopeExtFactor == 0 }},
	} {
		path := writeTiny(t, func(kv map[string]any, _ map[string][]uint64) {
			for k, v := range c.keys {
				kv[k] = v
			}
		})
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		hp, err := HParamsFromGGUF(f)
		f.Close()
		if err != nil {
			t.Fatal(c.name, err)
		}
		if !c.check(hp) {
			t.Fatalf("%s: %+v", c.name, hp)
		}
		r := hp.Layer(0).Rope
		if r.ExtFactor != hp.RopeExtFactor || r.BetaFast != hp.RopeBetaFast || r.BetaSlow != hp.RopeBetaSlow || r.OrigCtx != hp.RopeCtxOrig || r.PosScale != hp.RopeScale {
			t.Fatalf("%s: layer RoPE %+v does not carry the YaRN fields", c.name, r)
		}
	}
	bad := HParams{Arch: "llama", Layers: 1, Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 512, Vocab: 10, RopeBase: 10000, RopeDims: 64,
		RopeScale: 0.25, RopeExtFactor: 1, RopeBetaFast: 32, RopeBetaSlow: 1}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "YaRN") {
		t.Fatalf("YaRN without an original context: %v", err)
	}
}
