package service

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine/estimate"
	"nibble/engine/synth"
)

// tinyModel synthesizes a small llama GGUF (2 layers, 64 wide, the demo's
// vocabulary) trained on ctx tokens at path, and returns its bytes.
func tinyModel(t *testing.T, path string, ctx int) []byte {
	t.Helper()
	o := demo.Options()
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF, o.Ctx = 2, 64, 2, 1, 128, ctx
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pinBudget makes the machine's budget n bytes, whatever this machine has.
func pinBudget(s *Service, n int64) {
	s.machine.probe = func() (estimate.Budget, error) {
		return estimate.Budget{Bytes: n, OS: "linux", TotalRAM: 2 * n, AvailableRAM: n}, nil
	}
}

func setLimit(t *testing.T, s *Service, n int64) {
	t.Helper()
	if err := s.store.Update(func(c *settings.Settings) error { c.MemoryLimit = n; return nil }); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls until cond holds, for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, time.Minute, what, cond)
}

// waitWithin waits for cond as waitFor does, at most d.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// last is the latest event called name, and whether there was one.
func (r *recorder) last(name string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].name == name {
			return r.events[i].data, true
		}
	}
	return nil, false
}

// all are the payloads of every event called name so far.
func (r *recorder) all(name string) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []any
	for _, e := range r.events {
		if e.name == name {
			out = append(out, e.data)
		}
	}
	return out
}

// truncated is data cut in the middle of its tensors.
func truncated(data []byte) []byte { return bytes.Clone(data[:len(data)*2/3]) }
