package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/kv"
	"nibble/internal/testdata"
)

// noRotation is a CPU backend that says it cannot rotate any head dim, as
// a GPU backend may for some.
type noRotation struct{ *cpu.Backend }

func (noRotation) RotatesHeadDim(int) bool { return false }

// A session resolves its rotation: auto rotates q4 and not q8 or f16, on
// and off force it, and the cache is made as resolved. Where the backend
// cannot rotate the head dim, auto falls back to no rotation and on is
// refused.
func TestSessionResolvesRotation(t *testing.T) {
	m := openTiny(t, "tiny-llama-spm-q4_0.gguf", 2)
	for _, c := range []struct {
		typ     kv.Type
		mode    kv.RotateMode
		rotated bool
		label   string
	}{
		{kv.Q4, kv.RotateAuto, true, "q4 KV (rotated)"},
		{kv.Q8, kv.RotateAuto, false, "q8 KV"},
		{kv.F16, kv.RotateAuto, false, "f16 KV"},
		{kv.Q4, kv.RotateOff, false, "q4 KV"},
		{kv.Q8, kv.RotateOn, true, "q8 KV (rotated)"},
		{kv.F16, kv.RotateOn, false, "f16 KV"},
	} {
		// A resolved KVRotated given back (as a reconfigure does) is ignored.
		s, err := NewSession(m, m.Backend, Options{Ctx: 64, KV: c.typ, KVRotate: c.mode, KVRotated: !c.rotated})
		if err != nil {
			t.Fatalf("%v %v: %v", c.typ, c.mode, err)
		}
		if s.Opts.KVRotated != c.rotated || s.State.Cache.Config().Rotate != c.rotated || s.Opts.KVLabel() != c.label {
			t.Errorf("%v %v: rotated %v, cache rotates %v, label %q; want %v, %q", c.typ, c.mode, s.Opts.KVRotated,
				s.State.Cache.Config().Rotate, s.Opts.KVLabel(), c.rotated, c.label)
		}
		if _, err := s.Generate(t.Context(), m.EncodePrompt("Once upon a time"), GenParams{MaxTokens: 2}, nil); err != nil {
			t.Errorf("%v %v: generate: %v", c.typ, c.mode, err)
		}
		s.Close()
	}

	b := noRotation{cpu.New(1)}
	defer b.Close()
	m2, err := LoadModel(filepath.Join(testdata.Dir(t), "models", "tiny-llama-spm-q4_0.gguf"), b)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	s, err := NewSession(m2, b, Options{Ctx: 64, KV: kv.Q4})
	if err != nil {
		t.Fatal(err)
	}
	if s.Opts.KVRotated || s.State.Cache.Config().Rotate {
		t.Errorf("auto on a backend that cannot rotate: rotated %v, cache %v", s.Opts.KVRotated, s.State.Cache.Config().Rotate)
	}
	s.Close()
	if _, err := NewSession(m2, b, Options{Ctx: 64, KV: kv.Q4, KVRotate: kv.RotateOn}); err == nil || !strings.Contains(err.Error(), "cannot rotate") {
		t.Errorf("rotation on where the backend cannot: err %v", err)
	}
}
