package kvprobe

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/engine/synth"
)

// rotatesTo256 is a CPU backend that rotates K only up to head dim 256, as
// Metal does (backend.RotatesHeadDim).
type rotatesTo256 struct{ *cpu.Backend }

func (rotatesTo256) RotatesHeadDim(d int) bool { return d > 0 && d%8 == 0 && d <= 256 }

// A Gemma 4 with 256- and 512-wide heads on a backend that rotates only the
// narrower: one cache rotates all its layers or none, so the probe, the
// strict measure and a session all keep K unrotated, whichever kind of
// layer has the wide heads, and rotation asked for is refused. The scale
// ratio is the wide heads' (q·k scaled by 1.0).
func TestProbePerLayerHeadDims(t *testing.T) {
	for _, wideGlobal := range []bool{true, false} {
		o := synth.DefaultOptions("gemma4")
		o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Window = 3, 128, 2, 1, 128, 16
		o.HeadDim, o.Gemma4 = 256, synth.Gemma4Options{GlobalEvery: 3, HeadDimGlobal: 512}
		if !wideGlobal {
			o.HeadDim, o.Gemma4.HeadDimGlobal = 512, 256
		}
		o.Type, o.Seed, o.VocabData = ggml.F16, 5, vocab.LlamaSPM
		path := filepath.Join(t.TempDir(), "gemma4.gguf")
		if err := synth.Generate(path, o); err != nil {
			t.Fatal(err)
		}
		b := rotatesTo256{cpu.New(2)}
		m, err := engine.LoadModel(path, b)
		if err != nil {
			t.Fatal(err)
		}
		prompt := make([]int32, 40)
		for i := range prompt {
			prompt[i] = int32(100 + 7*i)
		}
		c, err := Choose(m, b, ChoiceOptions{Prompt: prompt, Residual: -1})
		if err != nil {
			t.Fatal(err)
		}
		if c.Candidates[0].Type != kv.Q4 || c.Candidates[0].Rotate || c.Rotate || math.Abs(c.ScaleRatio-math.Sqrt(512)) > 1e-6 {
			t.Errorf("wide global %v: q4 candidate %+v, chose rotated %v, scale ratio %.3f (want %.3f)", wideGlobal, c.Candidates[0], c.Rotate, c.ScaleRatio, math.Sqrt(512))
		}
		if skipped := c.Candidates[0].Skipped; !strings.Contains(skipped, "1/sqrt(512)") {
			t.Errorf("wide global %v: plain q4 skipped %q, want the 512-wide heads named", wideGlobal, skipped)
		}
		rep, err := MeasureQuality(m, b, prompt[:20], []kv.Type{kv.Q4}, QualityOptions{Batch: 8, Greedy: 2, Residual: -1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rotated[kv.Q4] {
			t.Errorf("wide global %v: the quality probe rotated q4", wideGlobal)
		}
		s, err := engine.NewSession(m, b, engine.Options{Ctx: 64, KV: kv.Q4})
		if err != nil {
			t.Fatal(err)
		}
		if s.Opts.KVRotated || s.State.Cache.Config().Rotate {
			t.Errorf("wide global %v: session rotated %v, cache %v", wideGlobal, s.Opts.KVRotated, s.State.Cache.Config().Rotate)
		}
		s.Close()
		if _, err := engine.NewSession(m, b, engine.Options{Ctx: 64, KV: kv.Q4, KVRotate: kv.RotateOn}); err == nil || !strings.Contains(err.Error(), "head dim 512") {
			t.Errorf("wide global %v: rotation on: err %v", wideGlobal, err)
		}
		m.Close()
		b.Close()
	}
}
