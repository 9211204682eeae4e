package model

import (
	"fmt"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
	"nibble/engine/quant"
)

// Model is a loaded GGUF: hyper-parameters and weight views into the mapping.
type Model struct {
	HP         HParams
	File       *gguf.File
	Path       string
	TokEmbd    *backend.Weight
	OutputNorm *backend.Weight
	Output     *backend.Weight // token_embd when tied
	Layers     []Layer
	RopeFreqs  []float32 // Llama 3.1 per-pair divisors, or nil
}

// Layer holds one transformer block's weights.
type Layer struct {
	AttnNorm, Wq, Wk, Wv, Wo *backend.Weight
	Bq, Bk, Bv               *backend.Weight // qwen2 only
	FFNNorm, Gate, Up, Down  *backend.Weight
}

// Open maps a GGUF file and checks every tensor the family needs has the
// name, shape and type the forward pass expects (as llama.cpp's loader does).
func Open(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

// Close unmaps the file.
func (m *Model) Close() error { return m.File.Close() }

// FromFile binds the weights of an opened GGUF, every tensor TensorLayout
// lists.
func FromFile(f *gguf.File) (*Model, error) {
	hp, err := HParamsFromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{HP: hp, File: f, Layers: make([]Layer, hp.Layers)}
	w := &binder{f: f}
	var ropeFreqs *backend.Weight
	for _, s := range TensorLayout(hp) {
		if _, ok := f.Tensor(s.Name); s.Optional && !ok {
			continue
		}
		dst := m.weight(&s)
		if dst == nil {
			dst = &ropeFreqs
		}
		*dst = w.get(s.Name, s.Dims)
	}
	if w.err != nil {
		return nil, w.err
	}
	if hp.TiedOutput {
		m.Output = m.TokEmbd
	}
	// Converters write rope_freqs as F32; divisors of another type are not
	// applied.
	if ropeFreqs != nil && ropeFreqs.Type == ggml.F32 {
		m.RopeFreqs = make([]float32, ropeFreqs.Cols)
		if err := quant.Dequantize(ggml.F32, m.RopeFreqs, ropeFreqs.Data); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// binder looks tensors up and records the first problem.
type binder struct {
	f   *gguf.File
	err error
}

func (b *binder) get(name string, dims []uint64) *backend.Weight {
	if b.err != nil {
		return nil
	}
	t, ok := b.f.Tensor(name)
	if !ok {
		b.err = fmt.Errorf("missing tensor %q", name)
		return nil
	}
	if len(t.Dims) != len(dims) {
		b.err = fmt.Errorf("tensor %q has %d dimensions, want %d (%v)", name, len(t.Dims), len(dims), dims)
		return nil
	}
	for i, d := range dims {
		if t.Dims[i] != d {
			b.err = fmt.Errorf("tensor %q has wrong shape %v, want %v", name, t.Dims, dims)
			return nil
		}
	}
	if !quant.Supported(t.Type) {
		b.err = fmt.Errorf("tensor %q has type %s, which this engine cannot compute with", name, t.Type)
		return nil
	}
	rows := 1
	if len(dims) == 2 {
		rows = int(dims[1])
	}
	return &backend.Weight{Name: name, Type: t.Type, Rows: rows, Cols: int(dims[0]), Data: b.f.TensorData(t)}
}
