// Package quant holds the weight formats of ggml (dequantize, reference
// quantize) and the CPU matmul that multiplies them by float activations.
//
// Numerics follow llama.cpp's CPU backend: before a matmul each activation
// row is quantized once (Q8_0, Q8_1 or Q8_K blocks, or rounded to fp16/bf16
// for half-precision weights) and the products are integer dot products per
// block, scaled in float32. That is both what makes the reference logits
// reproducible and what makes the loops fast. MXFP4 is the exception: its
// activations stay float (mxfp4.go says why), unless SetMXFP4Q8Activations
// asks for llama.cpp's Q8_0 pairing.
package quant

import (
	"fmt"

	"nibble/engine/ggml"
)

// Matrix is a row-major weight matrix: Rows rows of Cols elements (Cols is
// GGUF ne[0], the contiguous dimension), stored in Type's block format.
type Matrix struct {
	Type       ggml.Type
	Rows, Cols int
	Data       []byte
}

// Supported reports whether MatMul, Dequantize and DequantizeRow handle t.
func Supported(t ggml.Type) bool {
	return int(t) < len(kernelsPortable) && kernelsPortable[t].dot1 != nil
}

// rowBytes validates that n elements of t form whole blocks and returns
// their size in bytes.
func rowBytes(t ggml.Type, n int) (int, error) {
	if !Supported(t) {
		return 0, fmt.Errorf("quant: unsupported tensor type %s", t)
	}
	if n < 0 {
		return 0, fmt.Errorf("quant: negative element count %d", n)
	}
	if bs := t.BlockSize(); n%bs != 0 {
		return 0, fmt.Errorf("quant: %d elements of %s is not a multiple of the block size %d", n, t, bs)
	}
	return t.RowBytes(n), nil
}

// check validates m's shape against its data and returns the bytes per row.
func (m *Matrix) check() (int, error) {
	if m.Rows <= 0 || m.Cols <= 0 {
		return 0, fmt.Errorf("quant: bad matrix shape %d×%d", m.Rows, m.Cols)
	}
	rb, err := rowBytes(m.Type, m.Cols)
	if err != nil {
		return 0, err
	}
	if m.Rows > len(m.Data)/rb || len(m.Data) != m.Rows*rb {
		return 0, fmt.Errorf("quant: %s matrix %d×%d needs %d bytes per row, data has %d bytes",
			m.Type, m.Rows, m.Cols, rb, len(m.Data))
	}
	return rb, nil
}

// Kernels names the matmul kernels in use: "avx2", or "go" where there are
// no SIMD kernels for this machine (benchmarks print it).
func Kernels() string {
	if simdName == "" {
		return "go"
	}
	return simdName
}
