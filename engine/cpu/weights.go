package cpu

import (
	"fmt"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/engine/quant"
)

// weight is the CPU handle of one tensor: a matrix over a slice of the
// mapped file.
type weight struct {
	desc backend.WeightDesc
	m    quant.Matrix
}

func (w *weight) Desc() backend.WeightDesc { return w.desc }

type mapping struct{ weights []backend.Weight }

func (m *mapping) Weights() []backend.Weight { return m.weights }

// Close drops the handles; the CPU made nothing of the region to release.
func (m *mapping) Close() error {
	m.weights = nil
	return nil
}

// MapWeights slices the region: the handles read the file's pages in place.
func (b *Backend) MapWeights(region []byte, ds []backend.WeightDesc) (backend.Mapping, error) {
	m := &mapping{weights: make([]backend.Weight, len(ds))}
	for i, d := range ds {
		if err := checkWeight(&d, int64(len(region))); err != nil {
			return nil, err
		}
		end := d.Offset + d.Bytes()
		m.weights[i] = &weight{desc: d, m: quant.Matrix{Type: d.Type, Rows: d.Rows, Cols: d.Cols, Data: region[d.Offset:end:end]}}
	}
	return m, nil
}

// checkWeight reports a descriptor the CPU kernels cannot use or whose bytes
// are not inside a region of size bytes.
func checkWeight(d *backend.WeightDesc, size int64) error {
	switch {
	case !quant.Supported(d.Type):
		return fmt.Errorf("tensor %q has type %s, which the cpu backend cannot compute with", d.Name, d.Type)
	case d.Rows <= 0 || d.Cols <= 0 || d.Cols%d.Type.BlockSize() != 0:
		return fmt.Errorf("tensor %q: %d×%d is not a matrix of whole %s blocks of %d", d.Name, d.Rows, d.Cols, d.Type, d.Type.BlockSize())
	case int64(d.Rows) > (1<<62)/int64(d.Type.RowBytes(d.Cols)):
		return fmt.Errorf("tensor %q: %d rows of %d elements is too large", d.Name, d.Rows, d.Cols)
	case d.Offset < 0 || d.Offset > size || d.Bytes() > size-d.Offset:
		return fmt.Errorf("tensor %q: %d bytes at offset %d run past the region of %d bytes", d.Name, d.Bytes(), d.Offset, size)
	}
	return nil
}

// matrix is the CPU view of a handle made by MapWeights.
func matrix(w backend.Weight) quant.Matrix { return w.(*weight).m }

// vector returns a one-row weight (norms, biases) as floats: F32 in place,
// other types dequantized.
func (b *Backend) vector(w backend.Weight) []float32 {
	m := matrix(w)
	if m.Type == ggml.F32 {
		return unsafeF32(m.Data)
	}
	v := make([]float32, m.Rows*m.Cols)
	b.fail(quant.Dequantize(m.Type, v, m.Data))
	return v
}
