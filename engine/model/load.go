package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/gguf"
)

// Model is a loaded GGUF: hyper-parameters and the backend's handles to the
// weights in the file's mapping.
type Model struct {
	HP      HParams
	File    *gguf.File
	Path    string
	Backend backend.Backend // the backend the weights were mapped on
	weights backend.Mapping

	TokEmbd    backend.Weight
	OutputNorm backend.Weight
	Output     backend.Weight // token_embd when tied
	Layers     []Layer
	RopeFreqs  []float32 // Llama 3.1 per-pair divisors, or nil
	// Phi-3 LongRoPE per-pair divisors (rope_factors_long/short), or nil.
	RopeFactorsLong, RopeFactorsShort []float32
	// Gemma 4's per-layer inputs (nil without them).
	PerLayerTokEmbd, PerLayerModelProj, PerLayerProjNorm backend.Weight

	// smoothing is the model's K channel smoothing, shared by its states.
	smoothing smoothingScales
}

// Layer holds one transformer block's weights; a family leaves the ones it
// has not nil.
type Layer struct {
	AttnNorm, Wq, Wk, Wv, Wo backend.Weight
	Bq, Bk, Bv               backend.Weight // qwen2, gpt-oss
	Bo                       backend.Weight // gpt-oss
	Sinks                    backend.Weight // gpt-oss: [heads] attention sinks
	QNorm, KNorm             backend.Weight // qwen3, gemma3: per-head, [head dim]
	AttnPostNorm             backend.Weight // gemma2, gemma3
	FFNNorm, Gate, Up, Down  backend.Weight
	FFNPostNorm              backend.Weight // gemma2, gemma3
	// Gemma 4: the per-layer input's gate, projection and norm, and the
	// factor on the residual stream after the block (0: none).
	PerLayerInpGate, PerLayerProj, PerLayerPostNorm backend.Weight
	OutScale                                        float32

	// Mixture of experts: the router (and its bias), the experts' stacked
	// matrices and biases, the shared experts and their gate.
	GateInp, GateInpBias                   backend.Weight
	GateExps, UpExps, DownExps             backend.Weight
	GateExpsBias, UpExpsBias, DownExpsBias backend.Weight
	GateShexp, UpShexp, DownShexp          backend.Weight
	GateInpShexp                           backend.Weight
	// Gemma 4's experts: the dense part's post norm, the experts' pre and
	// post norms, the router input's factor, each expert's weight factor.
	FFNPostNorm1, FFNPreNorm2, FFNPostNorm2 backend.Weight
	GateInpScale, DownExpsScale             backend.Weight
}

// Open maps a GGUF file, checks every tensor the family needs has the name
// and shape the forward pass expects (as llama.cpp's loader does), and makes
// b's handles to them (Backend.MapWeights): the model runs on b.
func Open(path string, b backend.Backend) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f, b)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

// Close releases the backend's handles, then unmaps the file.
func (m *Model) Close() error {
	var err error
	if m.weights != nil {
		err = m.weights.Close()
		m.weights = nil
	}
	if cerr := m.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// FromFile binds the weights of an opened GGUF, every tensor TensorLayout
// lists (the views of fused tensors one by one), as handles of b.
func FromFile(f *gguf.File, b backend.Backend) (*Model, error) {
	hp, err := HParamsFromGGUF(f)
	if err != nil {
		return nil, err
	}
	if _, ok := b.(backend.Experts); hp.MoE() && !ok {
		return nil, fmt.Errorf("model %s has %d experts, and the %s backend does not run mixture-of-experts models", hp.Arch, hp.Experts, b.Name())
	}
	m := &Model{HP: hp, File: f, Backend: b, Layers: make([]Layer, hp.Layers)}
	var (
		descs []backend.WeightDesc
		dsts  []*backend.Weight
	)
	for _, s := range TensorLayout(hp) {
		t, ok := f.Tensor(s.Name)
		if s.Optional && !ok {
			continue
		}
		d, err := describe(f, t, s.Name, s.Dims)
		if err != nil {
			return nil, err
		}
		if s.Kind == AttnSinks && d.Type != ggml.F32 {
			// The attention op reads the sinks as floats (backend.Attention.Sinks).
			return nil, fmt.Errorf("tensor %q has type %s, want F32", s.Name, d.Type)
		}
		if s.Cols > 0 {
			if d.Cols*d.Rows%s.Cols != 0 || s.Cols%d.Type.BlockSize() != 0 {
				return nil, fmt.Errorf("tensor %q of %d×%d %s cannot be read as rows of %d", s.Name, d.Rows, d.Cols, d.Type, s.Cols)
			}
			d.Rows, d.Cols = d.Rows*d.Cols/s.Cols, s.Cols
		}
		if s.Kind == LayerOutScale {
			if t.Type != ggml.F32 {
				return nil, fmt.Errorf("tensor %q has type %s, want F32", s.Name, t.Type)
			}
			v := float32s(f.TensorData(t))[0]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("tensor %q holds %g", s.Name, v)
			}
			m.Layers[s.Layer].OutScale = v
			continue
		}
		if s.Kind.IsRopeFactors() {
			// Read on the host: the RoPE op takes the divisors as floats.
			// Converters write them as F32; divisors of another type are not applied.
			if t.Type == ggml.F32 {
				*m.ropeFactors(s.Kind) = float32s(f.TensorData(t))
			}
			continue
		}
		if s.Views == nil {
			descs = append(descs, d)
			dsts = append(dsts, m.weight(s.Kind, s.Layer))
			continue
		}
		rowBytes := int64(d.Type.RowBytes(d.Cols))
		for _, v := range s.Views {
			if v.Row < 0 || v.Rows <= 0 || v.Row+v.Rows > d.Rows {
				return nil, fmt.Errorf("tensor %q: view of rows [%d, %d) outside its %d rows", s.Name, v.Row, v.Row+v.Rows, d.Rows)
			}
			vd := d
			vd.Name = fmt.Sprintf("%s[%d:%d]", s.Name, v.Row, v.Row+v.Rows)
			vd.Rows, vd.Offset = v.Rows, d.Offset+int64(v.Row)*rowBytes
			descs = append(descs, vd)
			dsts = append(dsts, m.weight(v.Kind, s.Layer))
		}
	}
	mapped, err := b.MapWeights(f.Mapping(), descs)
	if err != nil {
		return nil, err
	}
	for i, w := range mapped.Weights() {
		*dsts[i] = w
	}
	m.weights = mapped
	if hp.TiedOutput {
		m.Output = m.TokEmbd
	}
	if err := m.checkFamilyOps(); err != nil {
		mapped.Close()
		return nil, err
	}
	return m, nil
}

// ropeFactors is the field of m that holds divisors of kind k.
func (m *Model) ropeFactors(k TensorKind) *[]float32 {
	switch k {
	case RopeFactorsLong:
		return &m.RopeFactorsLong
	case RopeFactorsShort:
		return &m.RopeFactorsShort
	}
	return &m.RopeFreqs
}

// describe checks that tensor t (nil: missing) has dims and locates it in
// the file mapping.
func describe(f *gguf.File, t *gguf.TensorInfo, name string, dims []uint64) (backend.WeightDesc, error) {
	if t == nil {
		return backend.WeightDesc{}, fmt.Errorf("missing tensor %q", name)
	}
	if len(t.Dims) != len(dims) {
		return backend.WeightDesc{}, fmt.Errorf("tensor %q has %d dimensions, want %d (%v)", name, len(t.Dims), len(dims), dims)
	}
	for i, d := range dims {
		if t.Dims[i] != d {
			return backend.WeightDesc{}, fmt.Errorf("tensor %q has wrong shape %v, want %v", name, t.Dims, dims)
		}
	}
	if f.TensorData(t) == nil {
		return backend.WeightDesc{}, fmt.Errorf("tensor %q has no data in the mapping", name)
	}
	// A 3-D tensor (experts stacked) is read as rows of ne[0] like a 2-D one.
	rows := 1
	for _, d := range dims[1:] {
		rows *= int(d)
	}
	return backend.WeightDesc{Name: name, Type: t.Type, Rows: rows, Cols: int(dims[0]), Offset: int64(f.DataOffset + t.Offset)}, nil
}

// float32s decodes little-endian F32 tensor bytes.
func float32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// checkFamilyOps refuses a model whose forward pass needs ops b lacks.
func (m *Model) checkFamilyOps() error {
	if m.HP.VNorm || m.PerLayerTokEmbd != nil {
		if _, ok := m.Backend.(backend.Gemma4Ops); !ok {
			return fmt.Errorf("the %s backend cannot run %s yet (it lacks Gemma 4's ops)", m.Backend.Name(), m.HP.Arch)
		}
	}
	for li := range m.Layers {
		if m.Layers[li].DownExpsScale != nil {
			if _, ok := m.Backend.(backend.ExpertScaler); !ok {
				return fmt.Errorf("the %s backend cannot run %s's experts yet (it lacks ScaleByExpert)", m.Backend.Name(), m.HP.Arch)
			}
		}
		if m.HP.KVSource(li) == li && m.Layers[li].Wk == nil {
			return fmt.Errorf("layer %d stores K/V but has no attn_k", li)
		}
	}
	return nil
}
