package service

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"nibble/app/backends"
	"nibble/app/settings"
	"nibble/engine/estimate"
	"nibble/engine/kv"
)

// The tests' expected speed is the Metal figure for an M1 Max: the same
// code, without the CPU probe's time and noise.
func init() {
	defaultExpect = func(d estimate.Desc, ctx int, t kv.Type, _ backends.Choice, threads int) (backends.Expected, error) {
		return backends.ExpectDecode(d, ctx, t, backends.Choice{Backend: backends.Metal, Device: "Apple M1 Max"}, threads)
	}
}

// TestExpectedSpeed: local models and catalog files carry the expected
// decode speed beside their estimate, at the settings' context; a machine
// without a figure says why.
func TestExpectedSpeed(t *testing.T) {
	s, _ := newService(t)
	tinyModel(t, filepath.Join(s.dirs.Models, "tiny.gguf"), 8192)
	setContext := func(n int) {
		if err := s.store.Update(func(c *settings.Settings) error { c.ContextTokens = n; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setContext(512)
	list, err := s.Models()
	if err != nil || len(list) == 0 {
		t.Fatalf("models: %v %v", list, err)
	}
	lm := list[0]
	if lm.TokPerSec <= 0 || !strings.Contains(lm.SpeedNote, "M1 Max") {
		t.Fatalf("local model: %.1f tok/s, note %q", lm.TokPerSec, lm.SpeedNote)
	}
	// A longer context reads more cache a token: slower.
	setContext(8192)
	list, _ = s.Models()
	if list[0].TokPerSec >= lm.TokPerSec {
		t.Errorf("at 8192 tokens %.1f tok/s, not below %.1f at 512", list[0].TokPerSec, lm.TokPerSec)
	}
	entries, err := s.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, f := range e.Files {
			if f.Estimate.TokPerSec <= 0 {
				t.Errorf("%s %s: no speed (%s)", e.ID, f.Quant, f.Estimate.SpeedNote)
			}
		}
	}
	s.machine.expect = func(estimate.Desc, int, kv.Type, backends.Choice, int) (backends.Expected, error) {
		return backends.Expected{}, errors.New(`no published memory bandwidth for "Apple M9"`)
	}
	list, _ = s.Models()
	if list[0].TokPerSec != 0 || !strings.Contains(list[0].SpeedNote, "Apple M9") {
		t.Errorf("unknown chip: %.1f tok/s, note %q", list[0].TokPerSec, list[0].SpeedNote)
	}
}
