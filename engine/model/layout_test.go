package model

import (
	"path/filepath"
	"slices"
	"testing"

	"nibble/engine/gguf"
	"nibble/internal/testdata"
)

// The table names every tensor of the shared fixtures with its dims (the
// files order them differently, which the loader does not mind), and no
// tensor they lack except optional ones.
func TestTensorLayoutMatchesFixtures(t *testing.T) {
	dir := filepath.Join(testdata.Dir(t), "models")
	for _, name := range testdata.Models {
		f, err := gguf.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		hp, err := HParamsFromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		checkLayout(t, name, f, hp)
		f.Close()
	}
}

// checkLayout reports the tensors of f that TensorLayout(hp) does not list
// or lists with other dims, and the ones it requires that f lacks.
func checkLayout(t *testing.T, name string, f *gguf.File, hp HParams) {
	t.Helper()
	listed := map[string]bool{}
	for _, s := range TensorLayout(hp) {
		listed[s.Name] = true
		ti, ok := f.Tensor(s.Name)
		switch {
		case !ok && !s.Optional:
			t.Errorf("%s: no %s", name, s.Name)
		case ok && !slices.Equal(ti.Dims, s.Dims):
			t.Errorf("%s: %s is %v, table says %v", name, s.Name, ti.Dims, s.Dims)
		}
	}
	for _, ti := range f.Tensors {
		if !listed[ti.Name] {
			t.Errorf("%s: %s is not in the table", name, ti.Name)
		}
	}
}
