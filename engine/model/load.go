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

// WeightsBytes is the size of every tensor in the file.
func WeightsBytes(f *gguf.File) int64 {
	var n int64
	for i := range f.Tensors {
		n += int64(f.Tensors[i].Size)
	}
	return n
}

// FromFile binds the weights of an opened GGUF.
func FromFile(f *gguf.File) (*Model, error) {
	hp, err := HParamsFromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{HP: hp, File: f}
	w := &binder{f: f}
	E, Q, KV := hp.Embd, hp.QDim(), hp.KVDim()
	m.TokEmbd = w.matrix("token_embd.weight", E, hp.Vocab)
	m.OutputNorm = w.vector("output_norm.weight", E)
	if hp.TiedOutput {
		m.Output = m.TokEmbd
	} else {
		m.Output = w.matrix("output.weight", E, hp.Vocab)
	}
	if t, ok := f.Tensor("rope_freqs.weight"); ok {
		rf := w.vector("rope_freqs.weight", hp.RopeDims/2)
		if w.err == nil && t.Type == ggml.F32 {
			m.RopeFreqs = make([]float32, rf.Cols)
			if err := quant.Dequantize(ggml.F32, m.RopeFreqs, rf.Data); err != nil {
				return nil, err
			}
		}
	}
	m.Layers = make([]Layer, hp.Layers)
	for i := range m.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		l := &m.Layers[i]
		l.AttnNorm = w.vector(p+"attn_norm.weight", E)
		l.Wq = w.matrix(p+"attn_q.weight", E, Q)
		l.Wk = w.matrix(p+"attn_k.weight", E, KV)
		l.Wv = w.matrix(p+"attn_v.weight", E, KV)
		l.Wo = w.matrix(p+"attn_output.weight", Q, E)
		if hp.QKVBias {
			l.Bq = w.vector(p+"attn_q.bias", Q)
			l.Bk = w.vector(p+"attn_k.bias", KV)
			l.Bv = w.vector(p+"attn_v.bias", KV)
		}
		l.FFNNorm = w.vector(p+"ffn_norm.weight", E)
		l.Gate = w.matrix(p+"ffn_gate.weight", E, hp.FF)
		l.Up = w.matrix(p+"ffn_up.weight", E, hp.FF)
		l.Down = w.matrix(p+"ffn_down.weight", hp.FF, E)
	}
	if w.err != nil {
		return nil, w.err
	}
	return m, nil
}

// binder looks tensors up and records the first problem.
type binder struct {
	f   *gguf.File
	err error
}

func (b *binder) get(name string, dims ...int) *backend.Weight {
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
		if t.Dims[i] != uint64(d) {
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
		rows = dims[1]
	}
	return &backend.Weight{Name: name, Type: t.Type, Rows: rows, Cols: dims[0], Data: b.f.TensorData(t)}
}

func (b *binder) matrix(name string, in, out int) *backend.Weight { return b.get(name, in, out) }
func (b *binder) vector(name string, n int) *backend.Weight       { return b.get(name, n) }
