package model

import (
	"strings"
	"testing"
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
