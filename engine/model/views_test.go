package model_test

import (
	"path/filepath"
	"testing"

	"nibble/catalog/vocab"
	"nibble/engine/cpu"
	"nibble/engine/ggml"
	"nibble/engine/model"
	"nibble/engine/synth"
)

// Phi-3's fused attn_qkv and ffn_up are bound as views: Wq, Wk, Wv, Gate
// and Up are handles at row offsets into the file's tensors, of the rows
// each part has, with nothing copied.
func TestPhi3FusedWeightsAreViews(t *testing.T) {
	o := synth.DefaultOptions("phi3")
	o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 1, 128, 4, 2, 96
	o.Seed, o.VocabData = 1, vocab.LlamaSPM
	path := filepath.Join(t.TempDir(), "phi3.gguf")
	if err := synth.Generate(path, o); err != nil {
		t.Fatal(err)
	}
	b := cpu.New(1)
	defer b.Close()
	m, err := model.Open(path, b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rowBytes := int64(ggml.F16.RowBytes(128))
	l := &m.Layers[0]
	base := func(name string) int64 {
		ti, _ := m.File.Tensor(name)
		return int64(m.File.DataOffset + ti.Offset)
	}
	for _, v := range []struct {
		name  string
		desc  func() (int64, int, int)
		fused string
		row   int
		rows  int
	}{
		{"q", func() (int64, int, int) { d := l.Wq.Desc(); return d.Offset, d.Rows, d.Cols }, "blk.0.attn_qkv.weight", 0, 128},
		{"k", func() (int64, int, int) { d := l.Wk.Desc(); return d.Offset, d.Rows, d.Cols }, "blk.0.attn_qkv.weight", 128, 64},
		{"v", func() (int64, int, int) { d := l.Wv.Desc(); return d.Offset, d.Rows, d.Cols }, "blk.0.attn_qkv.weight", 192, 64},
		{"gate", func() (int64, int, int) { d := l.Gate.Desc(); return d.Offset, d.Rows, d.Cols }, "blk.0.ffn_up.weight", 0, 96},
		{"up", func() (int64, int, int) { d := l.Up.Desc(); return d.Offset, d.Rows, d.Cols }, "blk.0.ffn_up.weight", 96, 96},
	} {
		off, rows, cols := v.desc()
		if want := base(v.fused) + int64(v.row)*rowBytes; off != want || rows != v.rows || cols != 128 {
			t.Errorf("%s: offset %d, %d×%d; want rows [%d, %d) of %s at %d, %d×128", v.name, off, rows, cols, v.row, v.row+v.rows, v.fused, want, v.rows)
		}
	}
}
