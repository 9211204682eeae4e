//go:build linux

package metal

import (
	"path/filepath"
	"strings"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/engine/model"
	"nibble/internal/testdata"
)

// The ops only Gemma needs have no Metal kernels yet: a Gemma forward pass
// fails at Sync with an error naming the first of them, rather than
// computing something else.
func TestGemmaOpsRefusedByName(t *testing.T) {
	dir := filepath.Join(testdata.Dir(t), "families")
	for _, name := range []string{"tiny-gemma2-f16.gguf", "tiny-gemma3-f16.gguf"} {
		b := newBackend(t)
		m, err := model.Open(filepath.Join(dir, name), b)
		if err != nil {
			t.Skipf("skipping: %v", err)
		}
		st, err := m.NewState(kv.Config{Type: kv.F16, Ctx: 8}, 4)
		if err != nil {
			t.Fatal(err)
		}
		err = st.Forward([]int32{1, 2, 3}, 0, make([]float32, m.HP.Vocab))
		if err == nil || !strings.Contains(err.Error(), "scale: not implemented on metal yet") {
			t.Errorf("%s: forward error %v, want the scale op refused by name", name, err)
		}
		st.Close()
		m.Close()
	}
}

// Each op without a kernel is refused at Sync by its name.
func TestFamilyOpsRefusedByName(t *testing.T) {
	b := newBackend(t)
	x, y := b.Alloc(64), b.Alloc(64)
	for _, c := range []struct {
		op   string
		call func()
	}{
		{"gelu_glu", func() { b.GeluGLU(x, x, y, 64) }},
		{"scale", func() { b.Scale(x, 2, 64) }},
		{"softcap", func() { b.Softcap(x, 30, 64) }},
		{"rope: the attention factor", func() {
			b.RoPE(x, 1, 64, 1, []int32{0}, &backend.RoPE{Neox: true, Dims: 64, Base: 10000, AttnFactor: 1.2})
		}},
	} {
		c.call()
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), c.op) {
			t.Errorf("%s: Sync error %v, want one naming it", c.op, err)
		}
	}
}
