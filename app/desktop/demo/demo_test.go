package demo

import (
	"os"
	"testing"

	"nibble/engine/estimate"
)

func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	var calls int
	var last, total int64
	path, err := Ensure(dir, func(done, tot int64) { calls++; last, total = done, tot })
	if err != nil {
		t.Fatal(err)
	}
	if path != Path(dir) || !Is(dir, path) {
		t.Fatalf("path %q, want %q", path, Path(dir))
	}
	if calls == 0 || last != total {
		t.Fatalf("progress: %d calls, last %d of %d", calls, last, total)
	}
	d, err := estimate.FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hp := d.HParams
	if hp.Arch != "llama" || hp.Layers != 4 || hp.Embd != 512 || hp.Heads != 8 || hp.KVHeads != 2 || hp.FF != 1536 {
		t.Fatalf("hparams %+v, want the Makefile's demo shape", hp)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// A second call keeps the file and reports nothing.
	calls = 0
	if _, err := Ensure(dir, func(int64, int64) { calls++ }); err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("second Ensure rewrote the file (%d progress calls)", calls)
	}
}
