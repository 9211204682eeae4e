package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/cpu"
	"nibble/engine/estimate"
	"nibble/engine/ggml"
	"nibble/engine/kv"
	"nibble/internal/testmodel"
)

// A model that does not fit the budget is refused before anything large is
// allocated, with advice saying what to change.
func TestSessionRefusesWhatDoesNotFit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llama-8b-shape.gguf")
	testmodel.WriteSparse(t, path, 32, 4096, 32, 8, 14336, 32000, ggml.Q4_0, true, nil)
	b := cpu.New(2)
	defer b.Close()
	m, err := LoadModel(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	budget := estimate.Simulated(1 << 30)
	_, err = NewSession(m, b, Options{Ctx: 8192, KV: kv.Q4, Budget: &budget})
	var nf *estimate.NotFitError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want *estimate.NotFitError", err)
	}
	if got := b.AllocatedBytes(); got != 0 {
		t.Fatalf("refused session still allocated %d bytes", got)
	}
	if len(nf.Advice) == 0 || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("refusal without advice: %v", err)
	}
	t.Logf("refusal:\n%v", err)

	// The same model within a big enough (simulated) budget gets its session.
	big := estimate.Simulated(16 << 30)
	s, err := NewSession(m, b, Options{Ctx: 512, KV: kv.Q4, Batch: 64, Budget: &big})
	if err != nil {
		t.Fatal(err)
	}
	if b.AllocatedBytes() == 0 || s.State == nil {
		t.Fatal("accepted session allocated nothing")
	}
}
