package metal

import (
	"fmt"
	"os"
	"unsafe"

	"nibble/engine/backend"
	"nibble/metal/device"
	"nibble/metal/encoder"
)

// weight is the handle of one tensor of a mapped model file: the buffer
// wrapping the region and the tensor's offset in it.
type weight struct {
	desc backend.WeightDesc
	w    encoder.Weight
}

func (w *weight) Desc() backend.WeightDesc { return w.desc }

// DeviceWeight (encoder.DeviceWeight) is the span the kernels read.
func (w *weight) DeviceWeight() *encoder.Weight { return &w.w }

type mapping struct {
	b       *Backend
	buf     device.Buffer // nil when there were no descriptors
	weights []backend.Weight
}

func (m *mapping) Weights() []backend.Weight { return m.weights }

// Close lets go of the wrapped region (after the work encoded so far has
// run); closing twice is harmless.
func (m *mapping) Close() error {
	if m.buf != nil && !m.b.closed {
		m.b.release(m.buf)
	}
	m.buf, m.weights = nil, nil
	return nil
}

// MapWeights wraps the region in one device buffer, without copying, and
// makes each weight a span of it. Metal wraps only page-aligned memory
// (newBufferWithBytesNoCopy), which a file mapping is; a region that is not
// (the conformance suite's Go slices) is copied into a new buffer instead,
// not counted in AllocatedBytes any more than the file's pages are.
func (b *Backend) MapWeights(region []byte, ds []backend.WeightDesc) (backend.Mapping, error) {
	for i := range ds {
		if err := checkWeight(&ds[i], int64(len(region))); err != nil {
			return nil, err
		}
	}
	m := &mapping{b: b, weights: make([]backend.Weight, len(ds))}
	if len(ds) == 0 {
		return m, nil
	}
	if b.closed {
		return nil, fmt.Errorf("metal: the backend is closed")
	}
	var (
		buf device.Buffer
		err error
	)
	if uintptr(unsafe.Pointer(unsafe.SliceData(region)))%uintptr(os.Getpagesize()) == 0 {
		buf, err = b.dev.WrapMemory(region)
	} else if buf, err = b.dev.NewBuffer(len(region)); err == nil {
		copy(buf.Bytes(), region)
	}
	if err != nil {
		return nil, fmt.Errorf("metal: mapping the model's %d bytes: %w", len(region), err)
	}
	b.live[buf] = 0 // not counted
	m.buf = buf
	for i, d := range ds {
		m.weights[i] = &weight{desc: d, w: encoder.Weight{
			Region: encoder.Region{Buf: buf, Off: int(d.Offset), Len: int(d.Bytes())},
			Type:   d.Type, Rows: d.Rows, Cols: d.Cols,
		}}
	}
	return m, nil
}

// checkWeight reports a descriptor the kernels cannot use or whose bytes are
// not inside a region of size bytes.
func checkWeight(d *backend.WeightDesc, size int64) error {
	if err := encoder.SupportsWeight(d.Type); err != nil {
		return fmt.Errorf("tensor %q has type %s, which the metal backend cannot compute with: %w", d.Name, d.Type, err)
	}
	switch {
	case d.Rows <= 0 || d.Cols <= 0 || d.Cols%d.Type.BlockSize() != 0:
		return fmt.Errorf("tensor %q: %d×%d is not a matrix of whole %s blocks of %d", d.Name, d.Rows, d.Cols, d.Type, d.Type.BlockSize())
	case int64(d.Rows) > (1<<62)/int64(d.Type.RowBytes(d.Cols)):
		return fmt.Errorf("tensor %q: %d rows of %d elements is too large", d.Name, d.Rows, d.Cols)
	case d.Offset < 0 || d.Offset > size || d.Bytes() > size-d.Offset:
		return fmt.Errorf("tensor %q: %d bytes at offset %d run past the region of %d bytes", d.Name, d.Bytes(), d.Offset, size)
	case d.Offset%4 != 0:
		// A buffer binding's offset must be a multiple of 4 (GGUF aligns
		// tensors to 32 bytes).
		return fmt.Errorf("tensor %q: offset %d is not a multiple of 4", d.Name, d.Offset)
	}
	return nil
}

// weight is the encoder's view of a handle made by MapWeights (nil, with
// the error recorded, for anything else).
func (b *Backend) weight(op string, w backend.Weight) *encoder.Weight {
	x, ok := w.(*weight)
	if !ok || x == nil {
		b.enc.Failf("%s: a weight of type %T, not of the metal backend", op, w)
		return nil
	}
	return &x.w
}
